/*
 * libmscclpp — bootstrap over an MPI communicator, in its own library: link with
 * -lmscclpp_mpi -lmscclpp and your MPI (libmscclpp itself never links MPI). Installed only when
 * the library was built with MPI; include it instead of (or after) <mscclpp/mscclpp.h>.
 */
#ifndef MSCCLPP_MSCCLPP_MPI_H
#define MSCCLPP_MSCCLPP_MPI_H

#include <mpi.h>

#include "mscclpp/mscclpp.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create a bootstrap over `comm` (collective over `comm`). The caller must have called MPI_Init
 * or MPI_Init_thread before, and must destroy the bootstrap before MPI_Finalize. The bootstrap
 * works on its own duplicate of `comm`, so its traffic never matches the caller's messages.
 *
 * Rank and size are those of `comm`. Every operation is nonblocking MPI plus a test loop bounded
 * by MSCCLPP_TIMEOUT. Send/recv tags must lie in [0, MPI_TAG_UB] (at least 32767); messages are
 * limited to INT_MAX bytes. The bootstrap serializes its own MPI calls with a mutex: calling it
 * from several threads is safe when MPI was initialized with at least MPI_THREAD_SERIALIZED and
 * no other code calls MPI at the same time, or with MPI_THREAD_MULTIPLE. After an operation
 * times out the bootstrap must not be used further (a collective may still be in flight).
 */
MSCCLPP_API mscclpp_result_t mscclpp_bootstrap_create_mpi(MPI_Comm comm,
                                                          mscclpp_bootstrap_t **boot);

#ifdef __cplusplus
}
#endif

#endif /* MSCCLPP_MSCCLPP_MPI_H */
