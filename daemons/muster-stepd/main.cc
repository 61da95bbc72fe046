// muster-stepd: one step's supervisor on a node (see muster/agent/step_supervisor_main.h).
#include "muster/agent/step_supervisor_main.h"

int main(int argc, char** argv) { return muster::agent::StepSupervisorMain(argc, argv); }
