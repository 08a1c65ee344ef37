/* SPDX-License-Identifier: Apache-2.0 */
/* tessera_dlpack.h's own DLPack declarations, forced even where
 * <dlpack/dlpack.h> exists, measured for test_dlpack.c. */
#define TSR_DLPACK_OWN_DECLARATIONS 1
#include "tessera/tessera_dlpack.h"

#include "dlpack_layout.h"

#ifndef TSR_DLPACK_DECLARED_HERE
#error "TSR_DLPACK_OWN_DECLARATIONS did not select tessera's own declarations"
#endif

void dlpack_layout_own(dlpack_layout *out) {
  DLPACK_LAYOUT_FILL(out);
}

void dlpack_constants_own(int out[DLPACK_LAYOUT_CONSTANTS]) {
  DLPACK_CONSTANTS_FILL(out);
}
