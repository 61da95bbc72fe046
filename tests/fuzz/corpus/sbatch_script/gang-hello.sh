#!/bin/bash
# A 2-node gang job: both nodes start together or not at all; each task sees its node's 8 GPUs.
#SBATCH -J gang-hello
#SBATCH -N 2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH -t 5:00

echo "batch script on $SLURMD_NODENAME: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST ($SLURM_JOB_NUM_NODES nodes)"
muster run bash -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"'
