#include "cli.h"

int main(int argc, char** argv) { return muster::cli::Main(argc, argv); }
