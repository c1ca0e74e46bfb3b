// The doctest runner shared by every test executable (compiled once), with a listener that
// says why a test case was skipped. A test that cannot run on this machine is registered as
//   TEST_CASE("name" * doctest::skip(!available()) * doctest::description("needs ..."))
// and prints `skipped: <name>: needs ...`; doctest counts it in its summary's `skipped` and
// scripts/test_summary.py lists the line under the executable.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

namespace {

class SkipReasons : public doctest::IReporter {
 public:
  explicit SkipReasons(const doctest::ContextOptions& options) : out_(*options.cout) {}

  // Also called for test cases the command line filters out; only a skip decorator is news.
  void test_case_skipped(const doctest::TestCaseData& test) override {
    if (!test.m_skip) return;
    out_ << "skipped: " << test.m_name << ": "
         << (test.m_description != nullptr ? test.m_description : "no reason given") << "\n";
  }

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}

 private:
  std::ostream& out_;
};

REGISTER_LISTENER("skip_reasons", 1, SkipReasons);

}  // namespace
