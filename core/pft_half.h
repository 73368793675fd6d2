/* pft_half: IEEE 754 binary16 <-> binary32 conversion (round to nearest even), for .npy and the wire. */
#ifndef PFT_HALF_H
#define PFT_HALF_H

#include <stddef.h>
#include <stdint.h>

/* float -> half bits, round to nearest even; overflow gives ±inf, NaN stays NaN. */
uint16_t pft_half_from_float(float f);
/* half bits -> float (exact). */
float pft_half_to_float(uint16_t h);

#endif
