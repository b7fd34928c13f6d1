#include "burstpool/version.hpp"

#include <cblas.h>
#include <hdf5.h>
#include <mpi.h>
#include <omp.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "build_info.hpp"  // generated
#include "burstpool/device.hpp"


namespace burstpool {

std::string version_report() {
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  MPI_Get_library_version(mpi, &length);
  std::string mpi_line(mpi, length);
  if (const size_t cut = mpi_line.find_first_of(",\n"); cut != std::string::npos) mpi_line.resize(cut);
  unsigned hdf5[3] = {0, 0, 0};
  H5get_libversion(&hdf5[0], &hdf5[1], &hdf5[2]);
  return fmt::format(
      "burstpool {} (commit {}, {} build, {})\n"
      "backends: cpu{}\n"
      "MPI:      {} (MPI {}.{})\n"
      "HDF5:     {}.{}.{}\n"
      "BLAS:     {}\n"
      "OpenMP:   {} ({} threads available)\n"
      "fmt {}.{}.{}, nlohmann-json {}.{}.{}\n"
      "{}",
      BURSTPOOL_VERSION, BURSTPOOL_GIT_HASH, BURSTPOOL_BUILD_TYPE, BURSTPOOL_ARCH, cuda_built() ? ", cuda, twin" : ", twin",
      mpi_line, MPI_VERSION, MPI_SUBVERSION, hdf5[0], hdf5[1], hdf5[2], openblas_get_config(), _OPENMP,
      omp_get_max_threads(), FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100,
      NLOHMANN_JSON_VERSION_MAJOR, NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH, cuda_versions());
}

}  // namespace burstpool
