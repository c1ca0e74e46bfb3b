// YAML to JSON over yaml-cpp, scalars typed by the core schema (yaml_config.h).
#include "trainer/yaml_config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <regex>

#include "core/error.h"

namespace ringlet::trainer {

namespace {

using nlohmann::json;

// A plain (unquoted) scalar as the core schema reads it.
json plain_scalar(const std::string& s, const std::string& where) {
  static const std::regex null_re("~|null|Null|NULL|");
  static const std::regex true_re("true|True|TRUE"), false_re("false|False|FALSE");
  static const std::regex int_re("[-+]?[0-9]+"), hex_re("0x[0-9a-fA-F]+"), oct_re("0o[0-7]+");
  static const std::regex real_re(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (std::regex_match(s, null_re)) return nullptr;
  if (std::regex_match(s, true_re)) return true;
  if (std::regex_match(s, false_re)) return false;
  const bool hex = std::regex_match(s, hex_re), oct = std::regex_match(s, oct_re);
  if (hex || oct || std::regex_match(s, int_re)) {
    errno = 0;
    const char* digits = hex || oct ? s.c_str() + 2 : s.c_str();
    const long long value = std::strtoll(digits, nullptr, hex ? 16 : oct ? 8 : 10);
    RINGLET_CHECK(errno != ERANGE, ValueError, where, ": ", s, " does not fit a 64-bit integer");
    return value;
  }
  if (std::regex_match(s, real_re)) return std::strtod(s.c_str(), nullptr);
  RINGLET_CHECK(s != ".inf" && s != "-.inf" && s != ".nan" && s != ".NaN", ValueError, where, ": ",
                s, " is not a finite number");
  return s;
}

json convert(const YAML::Node& node, const std::string& where) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
    case YAML::NodeType::Scalar: {
      const std::string& tag = node.Tag();
      if (tag == "!") return node.Scalar();  // quoted: a string
      RINGLET_CHECK(tag == "?" || tag.empty() || tag.rfind("tag:yaml.org,2002:", 0) == 0,
                    ValueError, where, ": the tag ", tag, " is not supported");
      if (tag == "tag:yaml.org,2002:str") return node.Scalar();
      return plain_scalar(node.Scalar(), where);
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (std::size_t i = 0; i < node.size(); ++i) {
        out.push_back(convert(node[i], where + "[" + std::to_string(i) + "]"));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& entry : node) {
        RINGLET_CHECK(entry.first.IsScalar(), ValueError, where, ": a key is not a plain name");
        const std::string key = entry.first.Scalar();
        RINGLET_CHECK(!out.contains(key), ValueError, where, ": key '", key, "' appears twice");
        out[key] = convert(entry.second, where == "" ? key : where + "." + key);
      }
      return out;
    }
  }
  return nullptr;
}

}  // namespace

bool is_yaml_path(const std::string& path) {
  const auto ends_with = [&](const std::string& suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".yaml") || ends_with(".yml");
}

json yaml_to_json(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    RINGLET_THROW(ValueError, "config file ", source, " is not valid YAML: line ", e.mark.line + 1,
                  ", column ", e.mark.column + 1, ": ", e.msg);
  }
  RINGLET_CHECK(!root.IsNull(), ValueError, "config file ", source,
                " is empty: write one \"key: value\" line per setting (ringlet train --help "
                "lists the keys)");
  RINGLET_CHECK(root.IsMap(), ValueError, "config file ", source,
                " must be a YAML mapping of keys to values (\"lr: 0.1\"), not a ",
                root.IsSequence() ? "list" : "single value");
  try {
    return convert(root, "");
  } catch (const core::ValueError& e) {
    RINGLET_THROW(ValueError, "config file ", source, ": ", e.what());
  }
}

}  // namespace ringlet::trainer
