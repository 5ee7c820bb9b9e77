// Test and benchmark fixture for Programmatic Dependent Launch chains (kernels/test/gpu_test.py,
// bench/kernels/pdl_chain.py); not part of the MoE layer, and not built into the node addon.
#pragma once
#include <cuda_runtime.h>
#include <cstddef>

namespace dispatch {

// Stands in for the model's routing kernel (native-cuda route_small), which writes the routing and the
// permuted X and is itself launched with PDL: launched with the PDL attribute, it lets the next kernel
// launch at once (griddepcontrol.launch_dependents first), waits for its own predecessor
// (griddepcontrol.wait), spins delay_ns more, then copies bytes[i] bytes src[i] -> dst[i] for each
// non-null pair. A kernel after it that reads a dst before its own wait reads the previous contents.
// Pointers 16-byte aligned, sizes multiples of 4.
void pdl_delayed_copy(const void* const src[3], void* const dst[3], const size_t bytes[3], long long delay_ns,
                      cudaStream_t stream);

}  // namespace dispatch
