#include "burstpool/version.hpp"

#include <cblas.h>
#include <hdf5.h>
#include <mpi.h>
#include <omp.h>

#include <fmt/format.h>

#include "build_info.hpp"  // generated
#include "burstpool/device.hpp"

namespace burstpool {

nlohmann::json version_info() {
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  MPI_Get_library_version(mpi, &length);
  std::string mpi_line(mpi, length);
  if (const size_t cut = mpi_line.find_first_of(",\n"); cut != std::string::npos) mpi_line.resize(cut);
  unsigned hdf5[3] = {0, 0, 0};
  H5get_libversion(&hdf5[0], &hdf5[1], &hdf5[2]);
  return {{"version", BURSTPOOL_VERSION},
          {"commit", BURSTPOOL_GIT_HASH},
          {"build_type", BURSTPOOL_BUILD_TYPE},
          {"architecture", BURSTPOOL_ARCH},
          {"backends", cuda_built() ? "cpu, cuda, twin" : "cpu, twin"},
          {"mpi", fmt::format("{} (MPI {}.{})", mpi_line, MPI_VERSION, MPI_SUBVERSION)},
          {"hdf5", fmt::format("{}.{}.{}", hdf5[0], hdf5[1], hdf5[2])},
          {"blas", openblas_get_config()},
          {"openmp", fmt::format("{} ({} threads available)", _OPENMP, omp_get_max_threads())},
          {"fmt", fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100)},
          {"nlohmann_json", fmt::format("{}.{}.{}", NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR,
                                        NLOHMANN_JSON_VERSION_PATCH)},
          {"onednn", onednn_info()},
          {"cuda", cuda_info()}};
}

std::string version_report() {
  const nlohmann::json v = version_info(), cuda = v["cuda"];
  std::string text = fmt::format(
      "burstpool {} (commit {}, {} build, {})\nbackends: {}\nMPI:      {}\nHDF5:     {}\nBLAS:     {}\n"
      "OpenMP:   {}\nfmt {}, nlohmann-json {}\n",
      v["version"].get<std::string>(), v["commit"].get<std::string>(), v["build_type"].get<std::string>(),
      v["architecture"].get<std::string>(), v["backends"].get<std::string>(), v["mpi"].get<std::string>(),
      v["hdf5"].get<std::string>(), v["blas"].get<std::string>(), v["openmp"].get<std::string>(),
      v["fmt"].get<std::string>(), v["nlohmann_json"].get<std::string>());
  const nlohmann::json dnnl = v["onednn"];
  text += dnnl["built"].get<bool>() ? fmt::format("oneDNN:   {} ({})\n", dnnl["version"].get<std::string>(),
                                                  dnnl["isa"].get<std::string>())
                                    : "oneDNN:   not built (CPU convolutions by burstpool's own kernels)\n";
  if (!cuda["built"].get<bool>()) return text + "CUDA:     not built (no CUDA toolkit with cuDNN and NCCL at configure time)";
  return text + fmt::format("CUDA:     runtime {}, driver {}, {} GPU(s) visible\ncuDNN:    {}\nNCCL:     {}",
                            cuda["runtime"].get<std::string>(), cuda["driver"].get<std::string>(),
                            cuda["gpus"].get<int>(), cuda["cudnn"].get<std::string>(),
                            cuda["nccl"].get<std::string>());
}

}  // namespace burstpool
