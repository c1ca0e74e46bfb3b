// TrainConfig <-> JSON and command-line overrides. One table lists every key with its member,
// so to_json, merge_json, the overrides and the "did you mean" hint cannot disagree.
#include "trainer/config.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "core/device.h"
#include "core/env.h"
#include "core/error.h"
#include "device/runtime.h"
#include "distributed/launch/launcher.h"
#include "trainer/config_value.h"
#include "trainer/dataset_catalog.h"
#include "trainer/usage_error.h"
#include "trainer/yaml_config.h"

namespace ringlet::trainer {
namespace {

using nlohmann::json;

struct Field {
  const char* key;
  std::function<json(const TrainConfig&)> get;
  std::function<void(TrainConfig&, const json&)> set;
  bool is_flag;  // bool: "--resume" alone means true
  // For keys whose JSON type varies: how a command-line value becomes JSON, and the type
  // named when a value is wrong. Unset: the value parses as the type the key has now.
  std::function<json(const std::string& text, const std::string& key)> parse = nullptr;
  const char* type_name = nullptr;
};

template <class T>
Field field(const char* key, T TrainConfig::*member) {
  return Field{key, [member](const TrainConfig& c) { return json(c.*member); },
               [member](TrainConfig& c, const json& v) { c.*member = config_value<T>(v); },
               std::is_same_v<T, bool>};
}

// The whole-number keys' own ranges, in one place: validate() checks them, and a value past the
// key's type (an int's 2^31) is refused naming this range, not the type's.
struct WholeRange {
  const char* key;
  std::int64_t least, most;  // most = kIntMost / kInt64Most: only the type's bound
  const char* note = "";
};
constexpr std::int64_t kIntMost = std::numeric_limits<int>::max();
constexpr std::int64_t kInt64Most = std::numeric_limits<std::int64_t>::max();

const std::vector<WholeRange>& whole_ranges() {
  static const std::vector<WholeRange> ranges = {
      {"epochs", 1, kIntMost},
      {"nproc", 1, distributed::kMaxWorkersPerNode},
      {"max_restarts", 0, 100},
      {"batch_size", 1, kIntMost},
      {"workers", 0, 64},
      {"limit_train", 0, kInt64Most, " (0 = all)"},
      {"limit_test", 0, kInt64Most, " (0 = all)"},
      {"log_every", 1, kIntMost},
      {"trace_steps", 0, 100000, " (0 = off)"},
      {"step_size", 1, kIntMost},
      {"threads", 0, 1024, " (0 = the machine's)"},
  };
  return ranges;
}

const WholeRange* whole_range(const std::string& key) {
  for (const WholeRange& r : whole_ranges()) {
    if (key == r.key) return &r;
  }
  return nullptr;
}

// ">= 1" where only the type bounds the key from above (a value past it is refused by the type).
std::string range_text(const WholeRange& r) {
  const bool type_bound = r.most == kIntMost || r.most == kInt64Most;
  return type_bound ? core::str(">= ", r.least) : core::str("in [", r.least, ", ", r.most, "]");
}

// What a key takes and got, for a value its setter refused: a whole-number key's own range, not
// its type's, else the setter's words.
std::string value_error(const std::string& key, const json& value, const ConfigValueError& e) {
  const WholeRange* r = whole_range(key);
  if (r == nullptr || value.is_null()) return e.what();
  return core::str("takes a whole number in [", r->least, ", ", r->most, "]", r->note, ", got ",
                   value.dump(), " (", value.type_name(), ")");
}

// Whether text is a decimal number as JSON and Python write them: an optional sign, digits with
// an optional fraction, an optional exponent (no hex, no inf or nan, no spaces).
bool decimal_number(const std::string& text) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i - start;
  };
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  std::size_t mantissa = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == text.size();
}

double parse_number(const std::string& text, const std::string& key) {
  if (decimal_number(text)) {
    try {
      const double value = std::stod(text);
      if (std::isfinite(value)) return value;
    } catch (const std::exception&) {  // out of range: refused below
    }
  }
  throw UsageError(
      core::str("--", key, ": '", text, "' is not a finite decimal number (such as 0.05 or 1e-4)"));
}

// mean / std: null (the dataset's), one number, or a list of numbers, one per channel; a
// single value stays a plain number, as the key was before it took lists.
json channel_values_json(const std::vector<double>& values) {
  if (values.empty()) return nullptr;
  if (values.size() == 1) return values.front();
  return values;
}

Field channel_values_field(const char* key, std::vector<double> TrainConfig::*member) {
  Field f{key, [member](const TrainConfig& c) { return channel_values_json(c.*member); },
          [member](TrainConfig& c, const json& v) {
            if (v.is_null()) {
              (c.*member).clear();
            } else if (!v.is_array()) {
              if (!v.is_number()) {
                throw ConfigValueError(core::str("takes a number or a list of numbers, got ",
                                                 v.dump(), " (", v.type_name(), ")"));
              }
              c.*member = {config_value<double>(v)};
            } else {
              std::vector<double> values;
              for (const json& x : v) values.push_back(config_value<double>(x));
              c.*member = values;
            }
          },
          false};
  f.parse = [](const std::string& text, const std::string& key) {
    std::vector<double> values;
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = text.find(',', start);
      values.push_back(parse_number(text.substr(start, comma - start), key));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return channel_values_json(values);
  };
  f.type_name = "a number or a list of numbers";
  return f;
}

// crop_padding: null (the dataset's) or a whole number of pixels.
Field optional_int_field(const char* key, std::optional<int> TrainConfig::*member) {
  Field f{key,
          [member](const TrainConfig& c) {
            return (c.*member).has_value() ? json(*(c.*member)) : json(nullptr);
          },
          [member](TrainConfig& c, const json& v) {
            if (v.is_null()) {
              (c.*member).reset();
            } else {
              c.*member = config_value<int>(v);
            }
          },
          false};
  f.parse = [](const std::string& text, const std::string& key) {
    try {
      return json(core::parse_int(text, "--" + key));
    } catch (const std::exception&) {
      throw UsageError(core::str("--", key, ": '", text, "' is not a whole number"));
    }
  };
  f.type_name = "an integer or null";
  return f;
}

const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      field("model", &TrainConfig::model),
      field("dataset", &TrainConfig::dataset),
      field("data_dir", &TrainConfig::data_dir),
      field("epochs", &TrainConfig::epochs),
      field("nproc", &TrainConfig::nproc),
      field("max_restarts", &TrainConfig::max_restarts),
      field("sync_bn", &TrainConfig::sync_bn),
      field("comm_hook", &TrainConfig::comm_hook),
      field("batch_size", &TrainConfig::batch_size),
      field("optimizer", &TrainConfig::optimizer),
      field("lr", &TrainConfig::lr),
      field("momentum", &TrainConfig::momentum),
      field("weight_decay", &TrainConfig::weight_decay),
      field("nesterov", &TrainConfig::nesterov),
      field("schedule", &TrainConfig::schedule),
      field("step_size", &TrainConfig::step_size),
      field("gamma", &TrainConfig::gamma),
      field("warmup_epochs", &TrainConfig::warmup_epochs),
      field("label_smoothing", &TrainConfig::label_smoothing),
      field("clip_grad_norm", &TrainConfig::clip_grad_norm),
      field("precision", &TrainConfig::precision),
      field("device", &TrainConfig::device),
      field("deterministic", &TrainConfig::deterministic),
      field("cuda_graph", &TrainConfig::cuda_graph),
      field("allow_tf32", &TrainConfig::allow_tf32),
      field("seed", &TrainConfig::seed),
      field("workers", &TrainConfig::workers),
      field("threads", &TrainConfig::threads),
      channel_values_field("mean", &TrainConfig::mean),
      channel_values_field("std", &TrainConfig::std),
      field("augment", &TrainConfig::augment),
      optional_int_field("crop_padding", &TrainConfig::crop_padding),
      field("tta", &TrainConfig::tta),
      field("limit_train", &TrainConfig::limit_train),
      field("limit_test", &TrainConfig::limit_test),
      field("out", &TrainConfig::out),
      field("resume", &TrainConfig::resume),
      field("reset", &TrainConfig::reset),
      field("resume_from", &TrainConfig::resume_from),
      field("log_every", &TrainConfig::log_every),
      field("trace_steps", &TrainConfig::trace_steps),
  };
  return table;
}

const Field* find(const std::string& key) {
  for (const auto& f : fields()) {
    if (key == f.key) return &f;
  }
  return nullptr;
}

// Parses a command-line value as the JSON type the field has now.
json parse_value(const json& current, const std::string& text, const std::string& key) {
  try {
    if (current.is_string()) return json(text);
    if (current.is_boolean()) {
      if (text == "true" || text == "1") return true;
      if (text == "false" || text == "0") return false;
      throw UsageError(core::str("--", key, ": expected true or false, got '", text, "'"));
    }
    if (current.is_number_integer() || current.is_number_unsigned()) {
      return json(core::parse_int(text, "--" + key));
    }
    return json(parse_number(text, key));
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception&) {
    const bool whole = current.is_number_integer() || current.is_number_unsigned();
    throw UsageError(
        core::str("--", key, ": '", text, "' is not a valid ", whole ? "whole number" : "value"));
  }
}

void check(bool ok, const std::string& what) {
  if (!ok) throw UsageError("invalid config: " + what);
}

// mean or std: empty (the dataset's), one value for every channel, or one per channel.
void check_channel_count(const std::vector<double>& values, const char* key,
                         const DatasetInfo& data) {
  const auto n = static_cast<std::int64_t>(values.size());
  check(n <= 1 || n == data.channels,
        core::str(key, " needs 1 or ", data.channels, " values for ", data.name, ", got ", n));
}

// Known augmentation names, and a crop padding of at most half the image side (more would
// let a window hold mostly padding).
void check_augment(const TrainConfig& c, const DatasetInfo& data) {
  parse_augment(c.augment);
  if (!c.crop_padding.has_value()) return;
  const std::int64_t padding = *c.crop_padding, most = data.side / 2;
  check(padding >= 0 && padding <= most,
        core::str("crop_padding must be in [0, ", most, "] for the ", data.side, "x", data.side,
                  " images of ", data.name, ", got ", padding));
}

// The dataset exists, its files can be found, the model takes its images.
// Whether two paths name the same directory as written ("d/" and "d/." are "d").
bool same_path(const std::string& a, const std::string& b) {
  const auto normal = [](const std::string& text) {
    std::filesystem::path p = std::filesystem::path(text).lexically_normal();
    return p.has_filename() || !p.has_parent_path() ? p : p.parent_path();
  };
  return normal(a) == normal(b);
}

void check_data(const TrainConfig& c) {
  const DatasetInfo* data = find_dataset(c.dataset);
  if (data == nullptr) {
    const std::string hint = nearest(c.dataset, [] {
      std::vector<std::string> names;
      for (const auto& d : dataset_catalog()) names.push_back(d.name);
      return names;
    }());
    check(false, "dataset must be one of " + dataset_names() + ", got '" + c.dataset + "'" +
                     (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
  }
  const bool default_dir = same_path(c.data_dir, data::kDefaultDataDir);
  check(!data->needs_data_dir || !default_dir,
        core::str("dataset ", data->name, " needs --data_dir DIR, a directory holding ",
                  data->files, "; the default data_dir holds Fashion-MNIST"));
  // Another dataset's default directory stands in for the default data_dir: it must be there,
  // never Fashion-MNIST's files read in its place.
  const bool own_default = default_dir && data->default_dir != data::kDefaultDataDir;
  check(!own_default || std::filesystem::is_directory(data->default_dir),
        core::str("dataset ", data->name, " reads ", data->default_dir,
                  " unless --data_dir says otherwise, and that directory does not exist: put ",
                  data->files, " there or pass --data_dir DIR (no Debian package installs ",
                  data->name, "; the default data_dir holds Fashion-MNIST, never used for ",
                  data->name, ")"));
  check(c.model != "fmnist_cnn" || (data->channels == 1 && data->side == 28),
        core::str("model fmnist_cnn takes 28x28 single-channel images, not those of ", data->name,
                  "; use --model resnet20 or resnet18"));
  check_augment(c, *data);
  check(c.tta.empty() || c.tta == "none" || c.tta == "flip",
        "tta must be none or flip, got '" + c.tta + "'");
  check_channel_count(c.mean, "mean", *data);
  check_channel_count(c.std, "std", *data);
  for (const double v : c.std) check(v > 0, core::str("std must be > 0, got ", v));
}

// A known device name that exists here (refused now, not mid-run).
void check_device(const TrainConfig& c) {
  core::Device device;
  try {
    device = core::parse_device(c.device);
  } catch (const core::ValueError& e) {
    check(false, e.what());
  }
  if (device.is_cpu()) return;
  try {
    device::check_device(device);
  } catch (const core::Error& e) {
    check(false, e.what());
  }
}

}  // namespace

Augmentations parse_augment(const std::string& augment) {
  static const std::vector<std::string> kNames = {"crop", "flip", "erase"};
  Augmentations out;
  const auto trimmed = [](const std::string& text) {
    const auto first = text.find_first_not_of(' ');
    if (first == std::string::npos) return std::string();
    return text.substr(first, text.find_last_not_of(' ') - first + 1);
  };
  if (trimmed(augment).empty() || trimmed(augment) == "none") return out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = augment.find(',', start);
    const std::string name = trimmed(augment.substr(start, comma - start));
    bool* slot = name == "crop"    ? &out.crop
                 : name == "flip"  ? &out.flip
                 : name == "erase" ? &out.erase
                                   : nullptr;
    if (slot == nullptr) throw_unknown("invalid config: augment", "augmentation", name, kNames);
    check(!*slot, "augment names '" + name + "' twice, in '" + augment + "'");
    *slot = true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const auto& f : fields()) keys.emplace_back(f.key);
  return keys;
}

json TrainConfig::to_json() const {
  json out = json::object();
  for (const auto& f : fields()) out[f.key] = f.get(*this);
  return out;
}

void TrainConfig::merge_json(const json& in, const std::string& source) {
  RINGLET_CHECK(in.is_object(), ValueError, source, ": the config must be a JSON object");
  for (const auto& [key, value] : in.items()) {
    const Field* f = find(key);
    if (f == nullptr) throw_unknown(source, "config key", key, config_keys());
    try {
      f->set(*this, value);
    } catch (const ConfigValueError& e) {
      RINGLET_THROW(ValueError, source, ": key '", key, "' ", value_error(key, value, e));
    } catch (const json::exception&) {
      RINGLET_THROW(ValueError, source, ": key '", key, "' has the wrong type (expected ",
                    f->type_name != nullptr ? f->type_name : f->get(*this).type_name(), ", got ",
                    value.type_name(), ")");
    }
  }
}

void TrainConfig::apply_overrides(const std::vector<std::string>& args,
                                  const std::vector<std::string>& allowed_extra) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      throw UsageError(
          core::str("unexpected argument '", arg, "' (options look like --key value)"));
    }
    std::string key = arg.substr(2), text;
    const auto eq = key.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      text = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    for (auto& c : key) c = c == '-' ? '_' : c;
    const Field* f = find(key);
    if (f == nullptr) {
      std::vector<std::string> choices;
      for (const auto& k : config_keys()) choices.push_back("--" + k);
      for (const auto& k : allowed_extra) choices.push_back(k);
      throw_unknown("", "option", "--" + key, choices);
    }
    if (!inline_value) {
      if (f->is_flag && (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)) {
        text = "true";
      } else {
        if (i + 1 >= args.size()) throw UsageError(core::str(arg, " needs a value"));
        text = args[++i];
      }
    }
    json value;
    try {
      value = f->parse ? f->parse(text, key) : parse_value(f->get(*this), text, key);
      f->set(*this, value);
    } catch (const ConfigValueError& e) {
      throw UsageError(core::str("--", key, " ", value_error(key, value, e)));
    }
  }
}

void TrainConfig::validate() const {
  const json values = to_json();
  for (const WholeRange& r : whole_ranges()) {
    const auto v = values.at(r.key).get<std::int64_t>();
    check(v >= r.least && v <= r.most,
          core::str(r.key, " must be ", range_text(r), r.note, ", got ", v));
  }
  check(lr > 0, core::str("lr must be > 0, got ", lr));
  check(momentum >= 0 && momentum < 1, core::str("momentum must be in [0, 1), got ", momentum));
  check(weight_decay >= 0, core::str("weight_decay must be >= 0, got ", weight_decay));
  check(optimizer == "sgd" || optimizer == "adam" || optimizer == "adamw",
        "optimizer must be sgd, adam or adamw, got '" + optimizer + "'");
  check(schedule == "none" || schedule == "step" || schedule == "cosine",
        "schedule must be none, step or cosine, got '" + schedule + "'");
  check(label_smoothing >= 0 && label_smoothing < 1,
        core::str("label_smoothing must be in [0, 1), got ", label_smoothing));
  check(precision == "f32" || precision == "bf16" || precision == "f16",
        "precision must be f32, bf16 or f16, got '" + precision + "'");
  check(!(resume && reset), "--resume and --reset contradict each other");
  check(!resume || !out.empty(), "--resume needs --out DIR, the run directory to continue");
  check(resume_from.empty() || !resume,
        "--resume_from DIR forks DIR's run into --out; --resume continues --out itself: pass "
        "one of them");
  check(resume_from.empty() || (!out.empty() && !same_path(resume_from, out)),
        "--resume_from " + resume_from + " needs --out naming a new run directory (" +
            (out.empty() ? "none given" : "it names the source") + "; --resume continues a run)");
  check(warmup_epochs >= 0 && warmup_epochs < epochs,
        core::str("warmup_epochs must be in [0, epochs), got ", warmup_epochs));
  check(deterministic == "auto" || deterministic == "on" || deterministic == "off",
        "deterministic must be auto, on or off, got '" + deterministic + "'");
  check(cuda_graph == "auto" || cuda_graph == "on" || cuda_graph == "off",
        "cuda_graph must be auto, on or off, got '" + cuda_graph + "'");
  check(comm_hook == "none" || comm_hook == "fp16_compress" || comm_hook == "bf16_compress",
        "comm_hook must be none, fp16_compress or bf16_compress, got '" + comm_hook + "'");
  check(clip_grad_norm >= 0,
        core::str("clip_grad_norm must be >= 0 (0 = off), got ", clip_grad_norm));
  check(gamma > 0, core::str("gamma must be > 0, got ", gamma));
  check_device(*this);
  check_data(*this);
}

void TrainConfig::fill_dataset_defaults() {
  const DatasetInfo* info = find_dataset(dataset);
  RINGLET_CHECK(info != nullptr, ValueError, "unknown dataset '", dataset,
                "' (valid: ", dataset_names(), ")");
  if (same_path(data_dir, data::kDefaultDataDir) && !info->default_dir.empty()) {
    data_dir = info->default_dir;  // the dataset's own default directory
  }
  if (mean.empty()) mean = info->mean;
  if (std.empty()) std = info->std;
  if (!crop_padding.has_value()) crop_padding = static_cast<int>(info->crop_padding);
}

json load_config_json(const std::string& path) {
  std::error_code ec;
  RINGLET_CHECK(!std::filesystem::is_directory(path, ec), ValueError, "config file ", path,
                " is a directory (--config takes a .json, .yaml or .yml file)");
  std::ifstream in(path);
  RINGLET_CHECK(in.good(), ValueError, "config file ", path,
                " cannot be opened: ", std::strerror(errno));
  if (is_yaml_path(path)) {
    std::ostringstream text;
    text << in.rdbuf();
    return yaml_to_json(text.str(), path);
  }
  try {
    return json::parse(in, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::exception& e) {  // parse errors, and numbers no double holds
    RINGLET_THROW(ValueError, "config file ", path, " is not valid JSON: ", e.what());
  }
}

TrainConfig load_config(const std::string& path) {
  TrainConfig config;
  config.merge_json(load_config_json(path), path);
  return config;
}

bool TrainConfig::deterministic_on(const std::string& device_text) const {
  if (deterministic != "auto") return deterministic == "on";
  return core::parse_device(device_text).is_emu();
}

}  // namespace ringlet::trainer
