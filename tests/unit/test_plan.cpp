#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "comm/exchange.hpp"
#include "burstpool/error.hpp"
#include "burstpool/model_io.hpp"
#include "burstpool/plan.hpp"

namespace burstpool {
namespace {

TEST(Slices, EvenSplitForAnyBatchAndRankCount) {
  for (int batch : {1, 2, 7, 64, 255}) {
    for (int parts = 1; parts <= std::min(batch, 9); ++parts) {
      int next = 0, smallest = batch, largest = 0;
      for (int i = 0; i < parts; ++i) {
        Slice s = even_slice(batch, parts, i);
        EXPECT_EQ(s.offset, next);
        next = s.end();
        smallest = std::min(smallest, s.count);
        largest = std::max(largest, s.count);
      }
      EXPECT_EQ(next, batch);
      EXPECT_LE(largest - smallest, 1);
    }
  }
  EXPECT_EQ(Plan::slice_of({1, 3}, 3, 7).offset, 4);  // second of two ranks: samples 4..6
  EXPECT_EQ(Plan::slice_of({1, 3}, 2, 7).count, 0);   // not in the set
}

TEST(Exchange, PiecesCoverTheBatchOnce) {
  // Producer on 0,1,2 (slices 3,2,2 of 7); consumer on 1,3 (slices 4,3).
  auto pieces = overlap_pieces({0, 1, 2}, {1, 3}, 7);
  std::vector<int> covered(7, 0);
  for (const Piece& p : pieces)
    for (int s = p.offset; s < p.offset + p.count; ++s) ++covered[s];
  for (int c : covered) EXPECT_EQ(c, 1);
  // Samples 0..2 go 0 -> 1, sample 3 stays on rank 1, 4 goes 1 -> 3, 5..6 go 2 -> 3.
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ((std::vector<int>{pieces[0].from, pieces[0].to, pieces[0].offset, pieces[0].count}),
            (std::vector<int>{0, 1, 0, 3}));
  EXPECT_EQ((std::vector<int>{pieces[1].from, pieces[1].to, pieces[1].offset, pieces[1].count}),
            (std::vector<int>{1, 1, 3, 1}));
  EXPECT_EQ((std::vector<int>{pieces[2].from, pieces[2].to, pieces[2].offset, pieces[2].count}),
            (std::vector<int>{1, 3, 4, 1}));
  EXPECT_EQ((std::vector<int>{pieces[3].from, pieces[3].to, pieces[3].offset, pieces[3].count}),
            (std::vector<int>{2, 3, 5, 2}));
}

ModelSpec tiny() {
  return parse_model_ini(
      "[data]\ntype = input\nshape = 3\n[fc]\ntype = linear\ninputs = data\nout_features = 2\n"
      "[loss]\ntype = softmax_cross_entropy\ninputs = fc\n",
      "tiny.ini");
}

std::string write(const std::string& json) {
  static int counter = 0;
  std::string path = fmt::format("/tmp/burstpool_plan_{}_{}.json", getpid(), counter++);
  std::ofstream(path) << json;
  return path;
}

std::string error_of(const std::string& json, int world = 2) {
  std::string path = write(json);
  try {
    validate_plan(load_plan(path), tiny(), world);
  } catch (const Error& e) {
    std::remove(path.c_str());
    std::string what = e.what();
    return what.rfind(path, 0) == 0 ? "PLAN" + what.substr(path.size()) : what;
  }
  std::remove(path.c_str());
  return "no error";
}

std::string plan_json(const std::string& fc_ranks, int batch = 4, int ranks = 2) {
  return fmt::format(R"({{"global_batch": {}, "ranks": {}, "layers": [{{"name": "data", "ranks": [0, 1]}},
    {{"name": "fc", "ranks": {}}}, {{"name": "loss", "ranks": [0]}}]}})",
                     batch, ranks, fc_ranks);
}

TEST(PlanFile, RoundTripAndDataParallel) {
  Plan p = data_parallel_plan(tiny(), 3, 9);
  std::string path = write("");
  save_plan(p, path);
  Plan q = load_plan(path);
  EXPECT_EQ(q.global_batch, 9);
  EXPECT_EQ(q.ranks, 3);
  EXPECT_EQ(q.layer_names, p.layer_names);
  EXPECT_EQ(q.layer_ranks, p.layer_ranks);
  EXPECT_NO_THROW(validate_plan(q, tiny(), 3));
  std::remove(path.c_str());
}

TEST(PlanFile, BadPlansAreRejectedWithFileAndLayer) {
  EXPECT_EQ(error_of(plan_json("[1]")), "no error");
  EXPECT_EQ(error_of(plan_json("[0, 2]")), "PLAN: layer 'fc' names rank 2, outside 0..1");
  EXPECT_EQ(error_of(plan_json("[]")), "PLAN: layer 'fc' has no ranks");
  EXPECT_EQ(error_of(plan_json("[1, 0]")), "PLAN: layer 'fc' must list its ranks in ascending order");
  EXPECT_EQ(error_of(plan_json("[1, 1]")), "PLAN: layer 'fc' lists rank 1 twice");
  EXPECT_EQ(error_of(plan_json("[0, 1]", 1)), "PLAN: global batch 1 is smaller than layer 'data''s 2 ranks");
  EXPECT_EQ(error_of(plan_json("[0]"), 3), "PLAN: the plan is for 2 ranks but 3 are running");
  EXPECT_EQ(error_of(R"({"global_batch": 4, "ranks": 2, "layers": [{"name": "data", "ranks": [0]},
    {"name": "loss", "ranks": [0]}]})"),
            "PLAN: layer 'fc' of model 'tiny' has no entry");
  EXPECT_EQ(error_of(R"({"global_batch": 4, "ranks": 2, "layers": [{"name": "data", "ranks": [0]},
    {"name": "fc", "ranks": [0]}, {"name": "fc9", "ranks": [0]}, {"name": "loss", "ranks": [0]}]})"),
            "PLAN: layer 'fc9' is not in model 'tiny'");
  EXPECT_EQ(error_of(R"({"ranks": 2, "layers": []})"), "PLAN: the plan needs an integer \"global_batch\"");
  EXPECT_EQ(error_of("{not json"), "PLAN: not valid JSON for a plan file (byte 3)");
}

// Rank sets as ranges: read and written, and every malformed case refused
// naming the layer and the part at fault; arrays still load.
TEST(PlanFile, RankRanges) {
  EXPECT_EQ(parse_rank_ranges("0-3,5, 7-8", 9, "P"), (RankSet{0, 1, 2, 3, 5, 7, 8}));
  EXPECT_EQ(parse_rank_ranges("4", 9, "P"), (RankSet{4}));
  EXPECT_EQ(rank_ranges({0, 1, 2, 3, 5, 7, 8}), "0-3,5,7-8");
  EXPECT_EQ(rank_ranges({6}), "6");
  auto refused = [](const std::string& text) {
    try {
      parse_rank_ranges(text, 8, "plan.json: layer 'fc'");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(refused("0-3,2-5"), "plan.json: layer 'fc': ranks \"0-3,2-5\": '2-5' overlaps or comes before rank 3: "
                                "list ranks in ascending order, once");
  EXPECT_EQ(refused("5-3"), "plan.json: layer 'fc': ranks \"5-3\": '5-3' runs backwards");
  EXPECT_EQ(refused("0-8"), "plan.json: layer 'fc': ranks \"0-8\": '0-8' names rank 8, outside 0..7");
  EXPECT_EQ(refused("0-2000000000"),
            "plan.json: layer 'fc': ranks \"0-2000000000\": '0-2000000000' names rank 2000000000, outside 0..7");
  EXPECT_EQ(refused("1,,2"), "plan.json: layer 'fc': ranks \"1,,2\": '' is not a rank or a range A-B");
  EXPECT_EQ(refused("a-b"), "plan.json: layer 'fc': ranks \"a-b\": 'a-b' is not a rank or a range A-B");
  EXPECT_EQ(refused("-1"), "plan.json: layer 'fc': ranks \"-1\": '-1' is not a rank or a range A-B");
  EXPECT_EQ(refused(""), "plan.json: layer 'fc': ranks \"\": '' is not a rank or a range A-B");
  EXPECT_EQ(error_of(plan_json("\"1\"")), "no error");
  EXPECT_EQ(error_of(plan_json("\"0-2\"")), "PLAN: layer 'fc': ranks \"0-2\": '0-2' names rank 2, outside 0..1");
  EXPECT_EQ(error_of(plan_json("7")), "PLAN: layer 'fc' needs \"ranks\": a string of ranges (\"0-7\") or an array");
}

// Read strictly: numbers range-checked before they become ints, nothing after
// the JSON value, no key twice, and only regular files.
TEST(PlanFile, StrictReading) {
  const std::string trailing = plan_json("[1]", 4, 2) + " trailing";
  // The error points past the object, into the text after it.
  const std::string error = error_of(trailing), prefix = "PLAN: not valid JSON for a plan file (byte ";
  ASSERT_EQ(error.substr(0, prefix.size()), prefix) << error;
  EXPECT_GT(std::stoul(error.substr(prefix.size())), trailing.size() - 9) << error;
  EXPECT_EQ(error_of(R"({"global_batch": 4, "ranks": 4294967297, "layers": []})"),
            "PLAN: \"ranks\" 4294967297 is outside [1, 2147483647]");
  EXPECT_EQ(error_of(plan_json("[4294967296]")), "PLAN: layer 'fc': rank 4294967296 is outside [0, 2147483647]");
  EXPECT_EQ(error_of(plan_json("[-1]")), "PLAN: layer 'fc': rank -1 is outside [0, 2147483647]");
  EXPECT_EQ(error_of(R"({"global_batch": 4, "global_batch": 8, "ranks": 2, "layers": []})"),
            "PLAN: key \"global_batch\" appears twice in one object");
  try {
    load_plan("/tmp");
    FAIL() << "a folder was read as a plan";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "/tmp: the plan file is not a regular file");
  }
}

}  // namespace
}  // namespace burstpool
