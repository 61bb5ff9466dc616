// Schedules by hand: the exact instruction lists of store-all and uniform on small chains, their text and JSON
// forms, and the validator rejecting each kind of schedule that cannot run, naming the instruction and why.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "common/input_error.h"
#include "harness/engine/plan.h"
#include "harness/engine/policy.h"

namespace ckpt {
namespace {

CaseSpec smallMlp() {
  CaseSpec c;
  c.batch = 2;
  c.width = 4;
  c.dropout = 0.1;
  c.blocks = {BlockSpec{}};
  return c;
}

ChainCost chainOf(int layers) { return homogeneousChainCost(smallMlp(), layers); }

std::string body(const Schedule& s) {
  std::string t;
  for (const Instr& i : s.instrs) t += toText(i) + "; ";
  return t;
}

TEST(Schedule, storeAllIsTheReferenceOrder) {
  EXPECT_EQ(body(storeAllSchedule(chainOf(3))),
            "forward 0 tape; free x 0; forward 1 tape; free x 1; forward 2 tape; free x 2; loss; "
            "backward 2; backward 1; backward 0; ");
}

TEST(Schedule, uniformFourLayersTwoSegments) {
  const Schedule s = uniformSchedule(chainOf(4), 2);
  EXPECT_EQ(s.policy, "uniform:k=2");
  // Segment [0, 2) keeps x_0 and rebuilds x_1; segment [2, 4) is the last and is taped at once.
  EXPECT_EQ(body(s),
            "forward 0; forward 1; free x 1; "
            "forward 2 tape; free x 2; forward 3 tape; free x 3; loss; backward 3; backward 2; "
            "forward 0 tape; free x 0; forward 1 tape; free x 1; free x 2; backward 1; backward 0; ");
}

TEST(Schedule, uniformSixLayersThreeSegments) {
  EXPECT_EQ(body(uniformSchedule(chainOf(6), 3)),
            "forward 0; forward 1; free x 1; forward 2; forward 3; free x 3; "
            "forward 4 tape; free x 4; forward 5 tape; free x 5; loss; backward 5; backward 4; "
            "forward 2 tape; free x 2; forward 3 tape; free x 3; free x 4; backward 3; backward 2; "
            "forward 0 tape; free x 0; forward 1 tape; free x 1; free x 2; backward 1; backward 0; ");
}

TEST(Schedule, uniformOneSegmentPerBlockCheckpointsEveryInput) {
  EXPECT_EQ(body(uniformSchedule(chainOf(2), 2)),
            "forward 0; forward 1 tape; free x 1; loss; backward 1; "
            "forward 0 tape; free x 0; free x 1; backward 0; ");
}

TEST(Schedule, uniformClampsSegmentsToTheChain) {
  EXPECT_EQ(uniformSchedule(chainOf(3), 99).policy, "uniform:k=3");
  EXPECT_EQ(body(uniformSchedule(chainOf(3), 1)), body(storeAllSchedule(chainOf(3))));
  EXPECT_EQ(uniformSchedule(chainOf(3), 0).policy, "uniform:k=1");
}

TEST(Schedule, uniformDefaultsToRoundSqrtSegments) {
  EXPECT_EQ(makeSchedule(parsePolicy("uniform"), chainOf(10)).policy, "uniform:k=3");
  EXPECT_EQ(makeSchedule(parsePolicy("uniform"), chainOf(13)).policy, "uniform:k=4");
}

TEST(Schedule, textAndJsonForms) {
  Schedule s = makeSchedule(parsePolicy("selective:recompute=dropout"), chainOf(1));
  EXPECT_EQ(toText(s),
            "# policy selective:recompute=dropout, 1 layers, 4 instructions\n# keep 0 110\n"
            "forward 0 tape\nfree x 0\nloss\nbackward 0\n");
  const auto j = toJson(s);
  EXPECT_EQ(j["policy"], "selective:recompute=dropout");
  EXPECT_EQ(j["layers"], 1);
  EXPECT_EQ(j["instructions"][0], (nlohmann::json{{"op", "forward"}, {"index", 0}, {"tape", true}}));
  EXPECT_EQ(j["instructions"][1], (nlohmann::json{{"op", "free"}, {"index", 0}}));
  EXPECT_EQ(j["instructions"][2], (nlohmann::json{{"op", "loss"}}));
  EXPECT_EQ(j["keep"][0], "110");
}

// The validator's message for a schedule: "" when it is accepted.
std::string rejection(const std::vector<Instr>& instrs, int layers = 2) {
  Schedule s;
  s.policy = "hand";
  s.layers = layers;
  s.instrs = instrs;
  try {
    validateSchedule(s, chainOf(layers));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const Instr F0{InstrKind::kForward, 0, false}, F0T{InstrKind::kForward, 0, true};
const Instr F1{InstrKind::kForward, 1, false}, F1T{InstrKind::kForward, 1, true};
const Instr X0{InstrKind::kFree, 0, false}, X1{InstrKind::kFree, 1, false};
const Instr LOSS{InstrKind::kLoss, 0, false};
const Instr B0{InstrKind::kBackward, 0, false}, B1{InstrKind::kBackward, 1, false};

TEST(Validator, acceptsAWellFormedSchedule) { EXPECT_EQ(rejection({F0T, X0, F1T, X1, LOSS, B1, B0}), ""); }

TEST(Validator, rejectsAForwardWithoutItsInput) {
  EXPECT_EQ(rejection({F0T, X0, X1, F1T}), "schedule instruction 3 (forward 1 tape): its input x_1 is not held");
}

TEST(Validator, rejectsAForwardOverAHeldOutput) {
  EXPECT_EQ(rejection({F0, F0T}),
            "schedule instruction 1 (forward 0 tape): its output x_1 is already held (free it first)");
}

TEST(Validator, rejectsATapeOverwrittenWhileLive) {
  EXPECT_EQ(rejection({F0T, X1, F0T}),
            "schedule instruction 2 (forward 0 tape): block 0's tape is still live and would be overwritten");
}

TEST(Validator, rejectsADoubleFree) {
  EXPECT_EQ(rejection({F0T, X0, X0}),
            "schedule instruction 2 (free x 0): x_0 is not held (freed twice, or never produced)");
}

TEST(Validator, rejectsTheLossWithoutTheChainOutput) {
  EXPECT_EQ(rejection({F0T, LOSS}), "schedule instruction 1 (loss): the chain output x_2 is not held");
}

TEST(Validator, rejectsASecondLoss) {
  EXPECT_EQ(rejection({F0T, X0, F1T, LOSS, F1, LOSS}),
            "schedule instruction 5 (loss): the loss already ran in this step");
}

TEST(Validator, rejectsABackwardWithoutItsTape) {
  EXPECT_EQ(rejection({F0T, X0, F1, X1, LOSS, B1}), "schedule instruction 5 (backward 1): block 1 has no tape");
}

TEST(Validator, rejectsABackwardWithoutItsOutputGradient) {
  EXPECT_EQ(rejection({F0T, X0, F1T, X1, LOSS, B0}),
            "schedule instruction 5 (backward 0): its output gradient g_1 does not exist");
}

TEST(Validator, rejectsOutOfRangeIndices) {
  EXPECT_EQ(rejection({{InstrKind::kForward, 2, true}}),
            "schedule instruction 0 (forward 2 tape): block 2 is outside [0, 2)");
  EXPECT_EQ(rejection({{InstrKind::kFree, 3, false}}),
            "schedule instruction 0 (free x 3): boundary 3 is outside [0, 2]");
}

TEST(Validator, rejectsWhatIsLiveAtTheEnd) {
  EXPECT_EQ(rejection({F0T, F1T, X1, LOSS, B1, B0}), "schedule end (after 6 instructions): x_0 is still held");
  EXPECT_EQ(rejection({F0, X0, F1T, X1, LOSS, B1}), "schedule end (after 6 instructions): g_1 is still live");
  EXPECT_EQ(rejection({F0T, X0, F1T, X1, LOSS, B1}),
            "schedule end (after 6 instructions): block 0's tape is still live");
  EXPECT_EQ(rejection({F0T, X0, F1T, X1}), "schedule end (after 4 instructions): the loss never ran");
}

TEST(Validator, rejectsASizeMismatch) {
  Schedule s = storeAllSchedule(chainOf(3));
  EXPECT_THROW(validateSchedule(s, chainOf(2)), InputError);
  s = storeAllSchedule(chainOf(2));
  s.keep = {KeepMask{true}};
  EXPECT_THROW(validateSchedule(s, chainOf(2)), InputError);
}

// Every segment count gives a schedule the validator accepts, with every block's first forward before the
// loss and exactly L + (L - last segment) forward evaluations.
RC_GTEST_PROP(Schedule, uniformIsValidForEverySegmentCount, ()) {
  const int layers = *rc::gen::inRange(1, 40);
  const int k = *rc::gen::inRange(1, layers + 1);
  const ChainCost c = chainOf(layers);
  const Schedule s = uniformSchedule(c, k);
  validateSchedule(s, c);
  const Plan p = planSchedule(s, c);
  const int lastStart = static_cast<int>(static_cast<int64_t>(k - 1) * layers / k);
  RC_ASSERT(p.forwardEvals == 2 * layers - (layers - lastStart));
}

}  // namespace
}  // namespace ckpt
