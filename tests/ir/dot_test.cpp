// Graph pictures (ir/dot.h): labels name values as the text does, with types and
// source lines; clusters, edges between them, collapsing; Graphviz reads them.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "ir/dot.h"
#include "ir/parser.h"
#include "ir_test_util.h"

using namespace kiln;

namespace {

bool has(const std::string& s, const std::string& piece) {
  return s.find(piece) != std::string::npos;
}

const char* kSoftmaxish = R"(
%0 = arg {index=0} : f32[4,8]  @ model.cpp:3
%1 = constant {value=2.0} : f32[]
%2 = mul %0, %1 : f32[4,8]  @ model.cpp:4
%3 = exp %2 : f32[4,8]  @ model.cpp:4
%4 = sum %3 {dims=[1], keepdim=0} : f32[4]  @ model.cpp:5
%5 = mul %4, %1 : f32[4]  @ model.cpp:6
return %5
)";

// Whether Graphviz's dot reads `text` (true when dot is not installed, with a message).
bool dot_reads(const std::string& text) {
  if (std::system("command -v dot > /dev/null 2>&1") != 0) {
    MESSAGE(
        "Graphviz's dot is not installed: the pictures are not parsed (apt-get install graphviz)");
    return true;
  }
  const auto path = std::filesystem::temp_directory_path() /
                    ("kiln_dot_test_" + std::to_string(::getpid()) + ".dot");
  std::ofstream(path) << text;
  const int rc = std::system(("dot -Tsvg '" + path.string() + "' -o /dev/null 2>&1").c_str());
  std::filesystem::remove(path);
  return rc == 0;
}

}  // namespace

TEST_CASE("a graph's picture names values as the text does, with types and source lines") {
  Graph g = parse_graph(kSoftmaxish);
  const std::string dot = graph_dot(g);
  CHECK(has(dot, "digraph kiln {"));
  CHECK(has(dot, "n2 [label=\"%2 = mul\\nf32[4,8]\\nmodel.cpp:4\"]"));
  CHECK(has(dot, "%4 = sum {dims=[1], keepdim=0}\\nf32[4]\\nmodel.cpp:5"));
  CHECK(has(dot, "n0 [label=\"%0 = arg 0\\nf32[4,8]\\nmodel.cpp:3\", shape=ellipse"));
  // The constant is drawn once per user, beside it.
  CHECK(has(dot, "n1_u2 [label=\"2\""));
  CHECK(has(dot, "n1_u5 [label=\"2\""));
  CHECK(!has(dot, "n1 [label"));
  CHECK(has(dot, "n0 -> n2;"));
  CHECK(has(dot, "n1_u2 -> n2;"));
  CHECK(has(dot, "n5 -> return_ [label=\"0\""));
  CHECK(!has(dot, "subgraph"));
  CHECK(dot_reads(dot));
}

TEST_CASE("kernels are clusters; an edge between them is a buffer, labelled with its type") {
  Graph g = parse_graph(kSoftmaxish);
  DotOptions o;
  o.title = "f(f32[4,8])";
  o.clusters = {{"k0_reduction_sum", "reduction: reads 128 B", {1, 2, 3, 4}},
                {"k1_elementwise_mul", "elementwise", {1, 5}}};
  const std::string dot = graph_dot(g, o);
  CHECK(has(dot, "subgraph cluster_k0 {\n    label=\"k0_reduction_sum\\nreduction: reads 128 B\""));
  CHECK(has(dot, "subgraph cluster_k1 {\n    label=\"k1_elementwise_mul\\nelementwise\""));
  CHECK(has(dot, "label=\"f(f32[4,8])\""));
  CHECK(has(dot, "n2 -> n3;"));                       // inside a kernel: a register, no label
  CHECK(has(dot, "n4 -> n5 [label=\"f32[4]\"];"));    // between kernels: memory
  CHECK(has(dot, "n0 -> n2 [label=\"f32[4,8]\"];"));  // an input read by a kernel
  // Each kernel draws its own copy of the constant its nodes use.
  const size_t k1 = dot.find("subgraph cluster_k1");
  CHECK(dot.find("n1_u5 [label") > k1);
  CHECK(dot.find("n1_u2 [label") < k1);
  CHECK(dot_reads(dot));
}

TEST_CASE("a kernel of more nodes than collapse_above is one node, and the title says so") {
  Graph g = parse_graph(kSoftmaxish);
  DotOptions o;
  o.collapse_above = 2;
  o.clusters = {{"k0_big", "", {1, 2, 3, 4}}, {"k1_small", "", {5}}};
  const std::string dot = graph_dot(g, o);
  CHECK(has(
      dot,
      "k0 [label=\"k0_big\\n3 nodes, collapsed:\\nexp, mul, sum\\nmodel.cpp:4\\nmodel.cpp:5\""));
  CHECK(!has(dot, "n2 [label"));
  CHECK(!has(dot, "n3 [label"));
  CHECK(has(dot, "n0 -> k0 [label=\"f32[4,8]\"];"));
  CHECK(has(dot, "k0 -> n5 [label=\"f32[4]\"];"));
  CHECK(has(dot, "1 kernel of more than 2 nodes drawn as one node"));
  CHECK(dot_reads(dot));
}

TEST_CASE("a kernel whose nodes another drew (a collective's wait) is one node naming it") {
  Graph g = parse_graph(kSoftmaxish);
  DotOptions o;
  o.clusters = {{"c0_start", "", {2, 3, 4, 5}}, {"c0_wait", "", {5}}};
  const std::string dot = graph_dot(g, o);
  CHECK(has(dot, "subgraph cluster_k1 {\n    label=\"c0_wait\";"));
  CHECK(has(dot, "k1 [label=\"c0_wait\", shape=plaintext"));
  CHECK(dot_reads(dot));
}

TEST_CASE("every op, awkward names and strings: Graphviz reads the picture") {
  Graph g = test::every_op_graph();
  const std::string dot = graph_dot(g);
  CHECK(has(dot, "w1 \\\"quoted\\\"\\n\ttab\\\\"));  // quotes, line breaks and backslashes escaped
  CHECK(has(dot, "model.cpp:10"));
  CHECK(dot_reads(dot));
  DotOptions o;
  for (NodeId id = 0; id < g.size(); id += 3)
    o.clusters.push_back({"k" + std::to_string(id), "\"odd\" \\ text", {id, id + 1, id + 2}});
  CHECK(dot_reads(graph_dot(g, o)));
}
