// muster-keeper: the keeper of one batch script (see muster/keeper/keeper_spec.h).
#include "muster/keeper/keeper_spec.h"

int main(int argc, char** argv) { return muster::keeper::KeeperProgramMain(argc, argv); }
