// MPI hello world with an all-reduce: every rank reports where it runs and the sum it got.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int one = rank + 1;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const char* node = getenv("SLURMD_NODENAME");
  printf("rank %d of %d on %s: sum %d\n", rank, size, node ? node : "?", sum);
  MPI_Finalize();
  return sum == size * (size + 1) / 2 ? 0 : 1;
}
