/* The device stand-in's state and the CPU reference (tests/emu/cuda_emu.h), linked into every
 * emulated test. */
#include "tests/emu/cuda_emu.h"

__thread emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
emu_block *emu_current;
long emu_misaligned;
alignas(1024) unsigned char emu_smem[EMU_SMEM + EMU_GUARD];

const mp_ops *emu_cpu_ops()
{
    char why[256];
    mp_backend_options o = {};
    const mp_ops *ops = NULL;
    if (mp_backend_open("cpu", &o, &ops, why, sizeof why) != MP_OK) {
        printf("FAIL the CPU backend: %s\n", why);
        exit(1);
    }
    return ops;
}
