#pragma once
// The parts of `doctor nccl-log`'s verdict, each in its own file: the catalogue's findings (one per
// entry seen) and the diagnoses that need several lines (a transport and the setting that chose
// it, a plugin and the device it did not find). nccl_log_check.cpp puts them in order.
#include <string>
#include <vector>

#include "gpuorch/doctor/finding.hpp"
#include "gpuorch/doctor/nccl_log.hpp"
#include "gpuorch/doctor/nccl_log_check.hpp"

namespace gpuorch::doctor {

// Whether the whole job ran on one host, as far as the log shows: one host name and every rank of
// the widest communicator seen completing init there. A log cut short is not known to be one host.
bool one_host(const NcclLog& log);

// The hit of the entry with this id, or nullptr.
const CatalogueHit* hit_of(const NcclLog& log, const std::string& entry_id);
// Whether a line established `fact`.
bool has_fact(const NcclLog& log, const std::string& fact);

// One finding per catalogue entry seen whose severity is info or more, in the order of their first
// line (at most kWarnShown of the generic WARN entries, then a count).
std::vector<Finding> catalogue_findings(const NcclLog& log, const NcclCheckOptions& options);

// Traffic between hosts that fell back to TCP sockets, and why (the environment, no RDMA device
// though an RDMA plugin is installed, no device at all); a socket interface that is missing.
void diagnose_network(const NcclLog& log, std::vector<Finding>& out);

}  // namespace gpuorch::doctor
