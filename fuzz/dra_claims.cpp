// What gpuorch dra-driver does with a claim (k8s/dra/claim_preparer.*): the kubelet's claim
// reference comes from a peer on the driver's socket, the ResourceClaim from the API server, and
// the checkpoint from the driver's own folder. The input is a reference "NAMESPACE UID NAME", a
// line break, then the ResourceClaim the API server answers (any text). Checked beyond "no crash":
// - a reference check_claim_ref accepts names a CDI spec file directly inside the CDI folder;
// - prepare either throws a std::exception (the claim's error in the answer) or gives devices
//   that are this node's (the slice of the recorded DGX H100), in this node's pool, each with its
//   CDI ID, and writes a CDI spec (valid JSON, one device per distinct device) and a checkpoint
//   that reads back as what the preparer holds; a second prepare answers the same;
// - unprepare removes the spec and the checkpoint entry;
// - load_checkpoint on the claim text as a file returns or throws std::runtime_error only.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "fuzz_support.hpp"
#include "gpuorch/k8s/dra/claim_preparer.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace {

namespace fs = std::filesystem;
namespace dra = gpuorch::k8s::dra;

void check(bool ok) {
  if (!ok) std::abort();
}

constexpr const char* kNode = "dgx-h100-01";

const gpuorch::topology::Host& host() {
  static const gpuorch::topology::Host h = [] {
    const char* source = std::getenv("GPUORCH_SOURCE_DIR");
    return gpuorch::topology::load_host_json((fs::path(source ? source : GPUORCH_SOURCE_DIR) /
                                              "tests/fixtures/topo/dgx-h100/expected/topo.json")
                                                 .string());
  }();
  return h;
}

// One folder per process, emptied for every input and removed at exit (the corpus replay runs
// in the test process).
struct WorkDir {
  fs::path path;
  WorkDir() {
    std::string pattern = (fs::temp_directory_path() / "gpuorch-fuzz-dra-XXXXXX").string();
    check(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

const fs::path& work_dir() {
  static const WorkDir dir;
  return dir.path;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = gpuorch::fuzz::text_of(data, size);
  const std::size_t nl = text.find('\n');
  const std::string first = text.substr(0, nl);
  const std::string body = nl == std::string::npos ? std::string() : text.substr(nl + 1);
  dra::ClaimRef ref;
  {
    std::istringstream words(first);
    words >> ref.ns >> ref.uid >> ref.name;
  }
  const fs::path dir = work_dir();
  std::error_code ec;
  fs::remove_all(dir / "cdi", ec);
  fs::remove(dir / "checkpoint.json", ec);

  dra::PreparerOptions o;
  o.cdi = {dra::kDriverName, (dir / "cdi").string(), (dir / "dev").string()};
  o.pool = kNode;
  o.checkpoint_path = (dir / "checkpoint.json").string();
  // A claim asking for sharing must not change the GPUs of the machine fuzzing (GPU hosts run
  // this target too): no nvidia-smi, and an MPS control program that cannot start, so the
  // failure paths of sharing are what gets exercised.
  o.nvidia_smi.path.clear();
  o.mps.control = (dir / "no-mps-control").string();
  fs::remove_all(dir / "mps", ec);
  const bool ref_ok = dra::check_claim_ref(ref).empty();
  if (ref_ok) {
    const fs::path spec = dra::cdi_spec_path(o.cdi, ref.uid);
    check(spec.parent_path() == dir / "cdi");
    check(spec.filename() == std::string(dra::kDriverName) + "-claim_" + ref.uid + ".json");
  }

  std::set<std::string> names;
  for (const auto& d : dra::slice_devices(host())) names.insert(d.name);
  dra::ClaimPreparer preparer(host(), o, [&body](const std::string&, const std::string&) {
    return nlohmann::json::parse(body);  // a parse error is the claim's error, as an API error is
  });
  std::vector<dra::PreparedDevice> devices;
  bool prepared = false;
  try {
    devices = preparer.prepare(ref);
    prepared = true;
  } catch (const std::exception&) {
  }
  if (prepared) {
    check(ref_ok && !devices.empty());
    for (const auto& d : devices) {
      check(names.count(d.device) == 1 && d.pool == kNode && d.cdi_device_ids.size() == 1);
      check(d.cdi_device_ids[0] ==
            std::string(dra::kDriverName) + "/claim=" + ref.uid + "-" + d.device);
    }
    std::set<std::string> distinct;
    for (const auto& d : devices) distinct.insert(d.device);
    const auto spec = nlohmann::json::parse(read(dra::cdi_spec_path(o.cdi, ref.uid)));
    check(spec.at("devices").size() == distinct.size());
    const auto saved = dra::load_checkpoint(o.checkpoint_path);
    check(saved.size() == 1 && saved.count(ref.uid) == 1);
    check(saved.at(ref.uid).devices.size() == devices.size());
    const auto again = preparer.prepare(ref);
    check(again.size() == devices.size());
    preparer.unprepare(ref);
    check(!fs::exists(dra::cdi_spec_path(o.cdi, ref.uid)));
    check(preparer.prepared().empty() && dra::load_checkpoint(o.checkpoint_path).empty());
  } else {
    check(preparer.prepared().empty());
  }

  {
    std::ofstream out(dir / "checkpoint.json", std::ios::binary | std::ios::trunc);
    out << body;
  }
  try {
    (void)dra::load_checkpoint(o.checkpoint_path);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
