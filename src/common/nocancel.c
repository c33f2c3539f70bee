// SPDX-License-Identifier: MIT
/*
 * The posting verbs' mark (nocancel.h), on its own: an executable that
 * links libibverbs' objects statically, without common/sys.c's wrappers
 * (the unit tests), needs the mark and not sys.c.
 */
#include "nocancel.h"

__thread unsigned int shca_nocancel_depth;
