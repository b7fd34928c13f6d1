#pragma once
// The transport of a device that has none of its own (a GPU whose ranks
// cannot use NCCL, because they share it; the twin without its transport):
// slices and gradient sums go through host memory, by MPI. Pieces to send
// are downloaded when queued; pieces received (and kept ones) land in host
// memory and are uploaded, or added to the destination's values (downloaded
// first), when the exchange finishes. Gradient buckets are downloaded when
// their sum starts and uploaded when it is waited for. In step with the
// walk: it cannot park pieces in flight.
#include <mpi.h>

#include "burstpool/device_model.hpp"

namespace burstpool {

// `device` must outlive the transport; `world`: the executor's (its rank
// numbers are the pieces').
DeviceTransport staging_transport(DeviceModel& device, MPI_Comm world);

}  // namespace burstpool
