// MPI hello world with an all-reduce: every rank reports where it runs and the sum it got.
// With the argument "abort", rank 1 then calls MPI_Abort(3) while the others wait.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int one = rank + 1;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const char* node = getenv("SLURMD_NODENAME");
  printf("rank %d of %d on %s: sum %d\n", rank, size, node ? node : "?", sum);
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "abort") == 0) {
    if (rank == 1) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Barrier(MPI_COMM_WORLD);  // the launcher ends the others
  }
  MPI_Finalize();
  return sum == size * (size + 1) / 2 ? 0 : 1;
}
