/* The device stand-in's state (tests/emu/cuda_emu.h), linked into every emulated test. */
#include "tests/emu/cuda_emu.h"

thread_local emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
emu_block *emu_current;
long emu_misaligned;
alignas(1024) unsigned char emu_smem[EMU_SMEM + EMU_GUARD];
