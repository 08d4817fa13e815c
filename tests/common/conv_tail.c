/* The conv-then-pointwise test graph (see conv_tail.h). */
#include "conv_tail.h"

json_t *conv_tail_graph(void) {
  return json_pack(
      "[{s:s, s:s, s:s, s:s, s:[], s:{}, s:[i,i,i,i], s:s},"
      " {s:s, s:s, s:s, s:s, s:[{s:s}], s:{}, s:[i,i,i,i], s:s},"
      " {s:s, s:s, s:s, s:[{s:s}], s:{}, s:[i,i,i,i], s:s},"
      " {s:s, s:s, s:s, s:s, s:[], s:{}, s:[i,i,i], s:s},"
      " {s:s, s:s, s:s, s:[{s:s}, {s:s}], s:{}, s:[i,i,i,i], s:s},"
      " {s:s, s:s, s:s, s:[{s:s}], s:{}, s:[i,i,i,i], s:s}]",
      "name", "x", "op", "placeholder", "target", "x", "tensor", "input:0", "args", "kwargs",
      "shape", 2, 3, 8, 8, "dtype", "float32",
      "name", "conv", "op", "call_module", "target", "Conv2d", "module", "conv", "args", "node",
      "x", "kwargs", "shape", 2, 4, 6, 6, "dtype", "float32",
      "name", "relu", "op", "call_function", "target", "torch.relu", "args", "node", "conv",
      "kwargs", "shape", 2, 4, 6, 6, "dtype", "float32",
      "name", "b", "op", "get_attr", "target", "b", "tensor", "param:b", "args", "kwargs",
      "shape", 4, 1, 1, "dtype", "float32",
      "name", "add", "op", "call_function", "target", "operator.add", "args", "node", "relu",
      "node", "b", "kwargs", "shape", 2, 4, 6, 6, "dtype", "float32",
      "name", "output", "op", "output", "target", "output", "args", "node", "add", "kwargs",
      "shape", 2, 4, 6, 6, "dtype", "float32");
}
