"""Index-space families: what a spec's `formula.family` may say, checked when the spec is loaded.

An element-wise operator is its formula. An operator with index-space semantics (a reduction, a
matrix product, a window, a gather) names the family plug-in that computes it
(`harness/reference/families/`) and the family's parameters; the formula's expression stays the
element-wise part (the value each input element contributes: `x` for an index reduction). This module holds
the declarations (the spec stage may not import the reference stage): one `FamilyDeclaration` per
family, with its parameters, their kinds and which are required, and the variables it gives the
spec's expression, unspecified rules and bounds; the plug-in module that computes the family
registers itself with a record pointing at it (harness.reference.families).

Parameter kinds: `choice` (one of the listed words; where `by_enum` is set, also the name of an
enum attribute field whose every member, lower-cased, is one of the words: the descriptor's value
then picks it), `array` (the name of an array attribute field), `scalar` (the name of a UINT or
INT attribute field), `output` (the name of an output tensor field: families with several outputs
name each), `expression` (a shape expression over attributes and enum members, evaluated per
descriptor: harness.spec.shape_expr), `bounds` (per choice of `combine`, an error bound in the
formula language over the family's bound variables, with where it comes from).

A family may also give the spec's `unspecified` rules variables of its own (`element_variables`:
facts about the group an input element belongs to, such as how many elements tie for an index
reduction's pick), and its bounds variables per output element (`bound_variables`). A family whose
output element is an element-wise function of a value it computes (matmul: the dot product `ab`,
then Alpha, Beta, C and a fused activation) names that value in its `formula_variables`: the spec's
expression reads it like an input, so the epilogue and its fused activation stay data in the spec
(harness.spec.fused composes an activation over the expression as for any element-wise operator).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.spec.expr import FLOAT, INTEGER, Formula, FormulaError, KindFacts, check_kinds, parse_formula
from harness.spec.shape_expr import ShapeExpr, parse_shape_expr


@dataclass(frozen=True)
class Param:
    kind: str  # choice | array | scalar | output | input | union | tensor_array | activations | expression | bounds
    required: bool = True
    choices: tuple[str, ...] = ()
    meaning: str = ""
    by_enum: bool = False  # a choice may name an enum attribute field instead (its value picks the choice)
    modes: tuple[str, ...] = ()  # only for these values of the family's `mode` (required there, refused elsewhere)


@dataclass(frozen=True)
class FamilyDeclaration:
    """Everything a spec may say of one index-space family, in one record (the reference's plug-in
    that computes it points at this record: harness.reference.families.result.FamilyPlugin).

    `params`: the parameters of the spec's `formula.family`. `formula_variables`: values the family
    computes per output element that the spec's expression (and its unspecified rules) read like
    float inputs, so that the expression is the element-wise epilogue (matmul's dot product `ab`).
    `element_variables`: names the family gives the spec's `unspecified` rules beside the formula's
    (facts about an element's group; integers). `bound_variables`: what its `bounds` formulas read
    per output element (floats)."""

    name: str
    params: dict[str, Param]
    formula_variables: dict[str, str] = field(default_factory=dict)
    element_variables: dict[str, str] = field(default_factory=dict)
    bound_variables: dict[str, str] = field(default_factory=dict)
    # the parameter whose value a Param's `modes` name (an optional one absent reads as its first
    # choice, so that a spec written before the modes existed keeps its meaning)
    mode_key: str = "mode"
    # `bounds` keys beside the mode's choices: a family whose error grows through several stages
    # states one bound per stage (the recurrent family: each step's accumulation, the activation's own)
    bound_keys: tuple[str, ...] = ()


REDUCTION_COMBINES = ("argmax", "argmin", "sum", "multiply", "average", "l1", "l2", "sum_square", "log_sum", "log_sum_exp",
                   "max", "min")


REDUCE_FAMILY = FamilyDeclaration(
    "reduce",
    params={
        "combine": Param("choice", choices=REDUCTION_COMBINES, by_enum=True,
                         meaning="how the elements of one reduced group become one output element: a fixed choice, or an "
                                 "enum attribute whose member (lower-cased) is the choice"),
        "axes": Param("array", meaning="the array attribute listing the reduced axes"),
        "last_on_ties": Param("expression", required=False,
                              meaning="true: an index reduction returns the last of equal candidates (default: the first)"),
        "bounds": Param("bounds", required=False,
                        meaning="per combine choice, the largest |device - exact| a conforming device may show, over "
                                "its bound variables (a choice without one: exact, a float output's zero sign aside if it is 0)"),
    },
    element_variables={
        "ties": "how many elements of the group equal the one an index reduction picks (1 for the other combines)",
        "out_of_range": "1 where the exact result of an integer output lies outside the output type's range, else 0",
    },
    bound_variables={
        "N": "the number of elements in the group (the product of the reduced sizes)",
        "eps": "the spacing of the output type at 1 (FLOAT32 2^-23, FLOAT16 2^-10): one faithful rounding step is within "
               "eps relative",
        "tiny": "FLOAT32's smallest normal, 2^-126 (an fp32 denormal input, intermediate or result may be flushed)",
        "tiny_out": "the output type's smallest normal",
        "max_out": "the output type's largest finite value",
        "inf": "+infinity: a bound of inf accepts every result, NaN included",
        "exact": "the exact result (float64)",
        "total": "the exact accumulation before the final function: the sum of the terms (sum of squares for l2, sum of "
                 "exp(x) for log_sum_exp), the product for multiply, the result for max and min",
        "sum_abs": "the sum of |term| over the group's finite terms (x; |x| for l1; x^2 for l2 and sum_square; exp(x) for "
                   "log_sum_exp)",
        "max_abs": "the largest |x| over the group's finite elements",
        "big": "the product of max(1, |x|) over the finite elements: no partial product is larger",
        "small": "the product of min(1, |x|) over the finite non-zero elements: no partial product of them is smaller",
    },
)

SORT_FAMILY = FamilyDeclaration(
    "sort",
    params={
        "mode": Param("choice", choices=("top_k",),
                      meaning="top_k: the K largest (or smallest) elements of each sequence along an axis, sorted, "
                              "equal values by ascending index, with their indices"),
        "axis": Param("scalar", meaning="the UINT field naming the axis"),
        "k": Param("scalar", meaning="the UINT field holding K"),
        "largest": Param("expression", meaning="true: the largest K in decreasing order; false: the smallest in increasing order"),
        "values": Param("output", meaning="the output tensor of the selected values"),
        "indices": Param("output", meaning="the output tensor of their indices within the sequence"),
    },
)

DATA_MOVEMENT_FAMILY = FamilyDeclaration(
    "data_movement",
    params={
        "mode": Param("choice", choices=("strided_window", "pad", "join", "split", "tile", "space_to_depth", "depth_to_space",
                                         "one_hot", "reverse_prefix", "coordinates_of_nonzero"),
                      meaning="strided_window: OutputTensor[o] = InputTensor[start + strides * o], start at the window's "
                              "beginning, or its end where the stride is negative; pad: the input placed after `start` "
                              "elements per dimension, the elements around it from the padding rule in force; join: "
                              "the present items of a tensor array concatenated along `axis`, in order; split: the "
                              "input cut along `axis` into the present items of an output tensor array, in order; "
                              "tile: `repeats` copies per dimension, output[i] = input[i mod input size]; "
                              "space_to_depth: {N, C, H * b, W * b} -> {N, C * b * b, H, W}, each b x b spatial block "
                              "moved into channels as `order` lays them out; depth_to_space: its inverse; "
                              "one_hot: per sequence along `axis`, values[1] at the position `indices` names and "
                              "values[0] elsewhere; reverse_prefix: per sequence along `axis` of the input, its first "
                              "`lengths` elements reversed and the rest copied; coordinates_of_nonzero: the "
                              "coordinates of the input's non-zero elements (-0 is zero, NaN is not), ascending by "
                              "element index, one row each over the input's last N dims (N the `coordinates` "
                              "output's last size), and their number in `count`"),
        "items": Param("tensor_array", meaning="the tensor array field whose present items are joined, or split into",
                       modes=("join", "split")),
        "axis": Param("scalar", meaning="the UINT field naming the joined or split axis, the axis of the output's "
                                        "one-hot sequences, or the axis reversed along",
                      modes=("join", "split", "one_hot", "reverse_prefix")),
        "indices": Param("input", meaning="the integer tensor of one position per sequence (size 1 along `axis`; a "
                                          "negative value of a signed type counts from the sequence's end; a "
                                          "position outside the sequence selects none)", modes=("one_hot",)),
        "values": Param("input", meaning="the tensor whose first two elements in row-major order are written: the "
                                         "first where a sequence's position is not selected, the second where it is",
                        modes=("one_hot",)),
        "lengths": Param("input", meaning="the unsigned integer tensor of one length per sequence (size 1 along "
                                          "`axis`); a length beyond the axis reverses the whole sequence",
                         modes=("reverse_prefix",)),
        "offsets": Param("array", meaning="the window's first element per dimension", modes=("strided_window",)),
        "sizes": Param("array", meaning="the window's extent per dimension", modes=("strided_window",)),
        "strides": Param("array", meaning="the step per dimension (INT: its sign picks the end the copy starts from)",
                         modes=("strided_window",)),
        "start": Param("array", meaning="padding elements before the input, per dimension", modes=("pad",)),
        "constant": Param("expression", meaning="true: padding elements are `value`", modes=("pad",)),
        "value": Param("union", meaning="the field of the constant: a DML_SCALAR_UNION (the tensor's own type), or a FLOAT "
                                            "(converted to the tensor's type)", modes=("pad",)),
        "edge": Param("expression", meaning="true: padding repeats the nearest edge element", modes=("pad",)),
        "reflection": Param("expression", meaning="true: mirrored about the edge elements, which are not repeated "
                                                  "(period 2(n - 1), folding over earlier padding)", modes=("pad",)),
        "symmetric": Param("expression", meaning="true: mirrored including the edge elements (period 2n)", modes=("pad",)),
        "repeats": Param("array", meaning="the number of copies per dimension", modes=("tile",)),
        "block_size": Param("scalar", meaning="the UINT field of the block's height and width",
                            modes=("space_to_depth", "depth_to_space")),
        "count": Param("output", modes=("coordinates_of_nonzero",),
                       meaning="the output of one element (every size 1) holding the number of non-zero elements"),
        "coordinates": Param("output", modes=("coordinates_of_nonzero",),
                             meaning="the output {1..., M, N} (M the input's element count) whose first `count` rows "
                                     "hold the non-zero elements' coordinates; the rows after them are the spec's "
                                     "`unspecified` rule's to mark (element variables `row` and `count`)"),
        "order": Param("choice", required=False, choices=("depth_column_row", "column_row_depth"), by_enum=True,
                       modes=("space_to_depth", "depth_to_space"),
                       meaning="how a depth channel holds (block row, block column, channel), slowest first: "
                               "depth_column_row, depth = (row * b + column) * C + channel; column_row_depth, "
                               "depth = channel * b * b + row * b + column; or an enum attribute field whose member, "
                               "lower-cased, is one of them (default: depth_column_row)"),
    },
    # per output element, for the modes whose page states what an index or a length outside the axis
    # selects (or leaves open): the spec's unspecified rules and expectations read the value that
    # decided the element; the other modes do not bind them
    element_variables={
        "index": "one_hot: the position `indices` holds for this element's sequence, as held (a UINT64 value beyond "
                 "2^63 - 1 reads as 2^63 - 1)",
        "length": "reverse_prefix: the length `lengths` holds for this element's sequence, as held (a UINT64 value "
                  "beyond 2^63 - 1 reads as 2^63 - 1)",
        "axis_size": "one_hot and reverse_prefix: the size of the output's sequences along `axis`",
        "on": "one_hot: 1 where the element is written with values' second element (its sequence's selected "
              "position), 0 where with the first",
        "row": "coordinates_of_nonzero: the row (second-to-last coordinate) of the coordinates output's element; 0 "
               "in the count output",
        "count": "coordinates_of_nonzero: the number of non-zero input elements, the fewer of the two readings D3D "
                 "allows where fp32 denormal inputs may be flushed (a flushed denormal is zero)",
    },
)

GATHER_FAMILY = FamilyDeclaration(
    "gather",
    params={
        # `mode` is optional so that a spec written before the modes existed keeps meaning
        # `take`; which of axis / index_dimensions a mode needs is checked by the plug-in
        # (harness.reference.families.gather.check_mode), as `modes` can only name explicit values
        "mode": Param("choice", required=False, choices=("take", "elements", "nd", "scatter_elements", "scatter_nd",
                                                         "scatter_flat"),
                      meaning="take (the default): input.take(indices, axis), the index sizes replacing the axis; "
                              "elements: indices has the input's rank, output[p] = input[p with p[axis] = indices[p]]; "
                              "nd: each index tuple (the last dim of indices) picks a sub-block of the input's "
                              "meaningful dims, per batch where batch_dimensions is set; "
                              "scatter_elements and scatter_nd: the inverse moves, the output a copy of the input with "
                              "the elements that elements or nd would read overwritten by `updates`; "
                              "scatter_flat: zeros of the output's Sizes, each input element written at the flat "
                              "row-major position of the whole output its index (indices has the input's Sizes) names"),
        "input": Param("input", meaning="the tensor read from"),
        "indices": Param("input", meaning="the integer tensor of indices (a negative value of a signed type counts "
                                          "from the end of the dimension it indexes)"),
        "axis": Param("scalar", required=False,
                      meaning="the UINT field naming the gathered axis of `input` (modes take and elements: required there)"),
        "index_dimensions": Param("scalar", required=False,
                                  meaning="the UINT field counting the trailing dims of `indices` that matter, its "
                                          "leading dims being 1 (modes take and nd: required there); in nd they "
                                          "include the batch dims and the tuple dim"),
        "input_dimensions": Param("scalar", modes=("nd", "scatter_nd"),
                                  meaning="the UINT field counting the trailing dims of `input` that matter "
                                          "(its leading dims are 1)"),
        "batch_dimensions": Param("scalar", required=False, modes=("nd",),
                                  meaning="the UINT field counting the leading meaningful dims that input, indices "
                                          "and output share as independent batches (absent: 0)"),
        "updates": Param("input", modes=("scatter_elements", "scatter_nd"),
                         meaning="the tensor of values written over the copied input: element p where mode "
                                 "elements would read it for indices[p] (scatter_elements), the slice of each index "
                                 "tuple (scatter_nd)"),
    },
    element_variables={
        "index": "the index value that selected this output element, as IndicesTensor holds it (a UINT64 value "
                 "beyond 2^63 - 1 reads as 2^63 - 1); in mode nd the first coordinate of the element's index tuple "
                 "outside its dimension, or the tuple's first coordinate when none is; in the scatter modes the "
                 "(first) coordinate that wrote the element, 0 where none did, and where any index of the tensor lies "
                 "outside its dimension that index in every element (a write that goes astray may land anywhere)",
        "axis_size": "the size of the input dimension that `index` indexes (the gathered axis in modes take and elements; "
                     "the output's element count in mode scatter_flat)",
        "conflicting_writes": "scatter modes: how many different values (bit patterns) the updates written to this "
                              "output element hold, less one (0 where none or one is written: the element is "
                              "determined); 0 in the gather modes",
    },
)

MATMUL_FAMILY = FamilyDeclaration(
    "matmul",
    params={
        "a": Param("input", meaning="the left matrix tensor: its last two dims are {M, K}, or {K, M} where transpose_a holds"),
        "b": Param("input", meaning="the right matrix tensor: its last two dims are {K, N}, or {N, K} where transpose_b holds"),
        "transpose_a": Param("expression", meaning="true: a's last two dims are transposed before the product"),
        "transpose_b": Param("expression", meaning="true: b's last two dims are transposed before the product"),
        "a_zero_point": Param("input", required=False,
                              meaning="a tensor subtracted from a before the product (a quantized product's zero point), "
                                      "broadcast against a as stored, right-aligned (size-1 leading dims beyond a's "
                                      "dropped); absent from a descriptor: the formula's absent value"),
        "b_zero_point": Param("input", required=False,
                              meaning="as a_zero_point, subtracted from b before the product"),
        "bounds": Param("bounds", required=False,
                        meaning="for the formula variable ab, the largest |device - exact| a conforming device may "
                                "show, over its bound variables (without one: exact)"),
    },
    formula_variables={
        "ab": "the exact dot product of row m of op(a) and column n of op(b) over K (float64), per output element "
              "{batch..., m, n}; the leading (batch) dims of a, b and the output are equal",
    },
    element_variables={
        "sum_abs": "the sum of |a_k * b_k| over the K terms whose factors are finite (zero points subtracted): what "
                   "the partial sums of any order stay within, for rules on an order that scales the terms first",
        "max_abs_a": "the largest finite |a_k| of row m of op(a) (zero point subtracted)",
        "max_abs_b": "the largest finite |b_k| of column n of op(b) (zero point subtracted)",
    },
    bound_variables={
        "K": "the number of terms of the dot product (the shared dimension of op(a) and op(b))",
        "eps": "the spacing of the output type at 1 (FLOAT32 2^-23, FLOAT16 2^-10): one faithful rounding step is within "
               "eps relative",
        "tiny": "FLOAT32's smallest normal, 2^-126 (an fp32 denormal input, product or partial sum may be flushed)",
        "tiny_out": "the output type's smallest normal",
        "max_out": "the output type's largest finite value",
        "inf": "+infinity: a bound of inf accepts every value of ab, NaN included",
        "exact": "the exact dot product ab (float64)",
        "sum_abs": "the sum of |a_k * b_k| over the K terms whose factors are finite",
        "sum_inputs": "the sum of |a_k| + |b_k| over the K terms' finite factors (a flushed fp32 denormal factor moves "
                      "its product by less than tiny times the other factor)",
    },
)

WINDOW_FAMILY = FamilyDeclaration(
    "window",
    params={
        "combine": Param("choice", required=False, choices=("dot", "max", "average", "lp", "im2col", "col2im"),
                         meaning="what a window gives (absent: dot): dot, the sum of input times filter (a convolution, "
                                 "formula variable xw); max, the largest input element the window reads (a pooling, with "
                                 "its index where `indices` names an output); average, their sum over a divisor (where the "
                                 "spec's expression reads xw: that expression over the sum xw and its divisor); lp, "
                                 "(sum |x|^p)^(1/p) over them; im2col, every window's elements as one column of a "
                                 "{N, C x prod(window_size), windows} output (0 on the padding); col2im, its adjoint: each "
                                 "column's elements summed back onto the positions they were read from. These take no filter"),
        "input": Param("input", meaning="the tensor the windows slide over: {batch, channels, spatial...}"),
        "filter": Param("input", modes=("dot",),
                        meaning="the weights: {out channels, channels / groups, kernel...}, or where `transposed` "
                                "holds {in channels, out channels / groups, kernel...}"),
        "window_size": Param("array", modes=("max", "average", "lp", "im2col", "col2im"),
                             meaning="a pooling's window extent per spatial dimension (the filter's kernel sizes for dot)"),
        "include_padding": Param("expression", required=False, modes=("average",),
                                 meaning="true: the average's divisor is the window's element count, padding included; "
                                         "false (the default): the count of window elements that land on the input"),
        "p": Param("scalar", modes=("lp",), meaning="the UINT field of lp's exponent p"),
        "indices": Param("output", required=False, modes=("max",),
                         meaning="an output tensor of the flat row-major input index of each window's largest element "
                                 "(the first in window order among equal ones); absent from a descriptor: not written"),
        "strides": Param("array", meaning="the window's step per spatial dimension"),
        "dilations": Param("array", required=False,
                           meaning="the step between kernel elements per spatial dimension (absent: 1)"),
        "start": Param("array", meaning="the zero padding before each spatial dimension (transposed: cropped from the "
                                        "result's start)"),
        "end": Param("array", meaning="the zero padding after each spatial dimension (transposed: cropped from the "
                                      "result's end)"),
        "output_padding": Param("array", required=False,
                                meaning="transposed only: positions added at the end of each spatial dimension of the "
                                        "result (they hold what the transposed window gives there, zero past its reach)"),
        "groups": Param("scalar", modes=("dot",),
                        meaning="the UINT field of the group count: channels split into that many equal groups, "
                                "each output channel reading its group's input channels only"),
        "transposed": Param("expression", modes=("dot",),
                            meaning="true: the adjoint of the forward window (each input element scattered "
                                    "over the output through the filter)"),
        "flip": Param("expression", modes=("dot",),
                      meaning="true: the filter is read in reverse order along each spatial dimension"),
        "input_zero_point": Param("input", required=False, modes=("dot", "average"),
                                  meaning="a tensor subtracted from the input before the products (a quantized "
                                          "convolution's zero point), broadcast right-aligned; a padded position is "
                                          "no term, so it reads as the zero point. average: subtracted before the sum "
                                          "(a quantized average, whose expression reads xw and divisor)"),
        "filter_zero_point": Param("input", required=False, modes=("dot",),
                                   meaning="one value per output channel, laid out as the output ({1, M, 1, ...}, "
                                           "right-aligned), subtracted from that channel's filter (forward only)"),
        "bounds": Param("bounds", required=False,
                        meaning="dot: for the formula variable xw; a pooling: per combine choice; the largest "
                                "|device - exact| a conforming device may show, over the bound variables (without one: "
                                "exact)"),
    },
    formula_variables={
        "xw": "the exact sum of input times filter over the window of each output element {n, m, spatial...} "
              "(float64): the input channels of m's group, the kernel positions that land on the input; an average "
              "whose expression reads it: the exact sum of the window's input elements less input_zero_point",
        "divisor": "an average whose expression reads xw: its divisor per output element (the count of window "
                   "elements on the input, or prod(window_size) where include_padding holds); 0 for an empty window",
    },
    element_variables={
        "off_input_nonfinite": "1 where a kernel position that reads no input element (padding, a transposed window's "
                               "gap) meets a NaN or infinite filter element, else 0: a device that multiplies a padded "
                               "zero there (0 * inf) gets NaN, one that skips the term does not",
        "past_reach": "1 where the output position lies past what the window reaches in some spatial dimension (a "
                      "position an output padding adds), else 0",
        "output_padded": "1 where the output position is one of the last `output_padding` positions of some spatial "
                         "dimension (a position the output padding adds, within the window's reach or past it), else 0",
        "ties": "a pooling: how many elements of the window equal its largest (max), else 1",
        "empty_window": "a pooling: 1 where no element of the window lands on the input (all padding), else 0",
    },
    mode_key="combine",
    bound_variables={
    **MATMUL_FAMILY.bound_variables,
    "K": "the number of terms of the window's dot product: (channels / groups) * prod(kernel sizes), an upper bound "
         "on the kernel positions that land on the input",
    "inf": "+infinity: a bound of inf accepts every value of xw, NaN included",
    "exact": "the exact window sum xw (float64)",
    "sum_abs": "the sum of |x * w| over the window's terms whose factors are finite",
    "sum_inputs": "the sum of |x| + |w| over the window's terms' finite factors (a flushed fp32 denormal factor moves "
                  "its product by less than tiny times the other factor)",
    "N": "a pooling: the number of window elements that land on the input (the terms summed); col2im: the number of "
         "column elements summed onto the output position",
    "D": "a pooling: the average's divisor (N, or the window's element count where include_padding holds); N otherwise",
    "max_abs": "a pooling: the largest |x| over the window's finite elements",
    "p": "lp: the exponent p (the value of the `p` field); 1 for the other combines",
    "sum_abs_log2": "lp: the sum of |x|^p * max(1, |log2 |x||) over the window's finite non-zero elements (HLSL pow's "
                    "log2 error is scaled by |log2 x|, so each term's error weighs its own log); average: the same over |x|",
    "max_log2": "lp: the largest max(1, |log2 |x||) over the window's finite non-zero elements (1 where there is none)",
},
)

SCAN_FAMILY = FamilyDeclaration(
    "scan",
    params={
        "combine": Param("choice", choices=("sum", "multiply"),
                         meaning="sum: a running sum; multiply: a running product"),
        "axis": Param("scalar", meaning="the UINT field naming the axis the scan runs along"),
        "reverse": Param("expression", required=False,
                         meaning="true: the scan runs from the axis' last element to its first (default: first to last)"),
        "exclusive": Param("expression", required=False,
                           meaning="true: an output element combines the elements before it, not itself (default: "
                                   "inclusive); the first one's group is empty: +0 for a sum, 1 for a product"),
        "bounds": Param("bounds", required=False,
                        meaning="per combine, the largest |device - exact| a conforming device may show, over the bound "
                                "variables (as the reduce family's, N per output element)"),
    },
    element_variables={
        "out_of_range": "1 where the exact running value of an integer output lies outside the output type's range, else 0",
    },
    bound_variables=dict(REDUCE_FAMILY.bound_variables,
                         N="the number of elements the output element combines (its position along the axis, plus one "
                           "when inclusive; 0 for an exclusive scan's first element)"),
)

NORMALIZE_FAMILY = FamilyDeclaration(
    "normalize",
    params={
        "mode": Param("choice", choices=("softmax", "log_softmax", "hardmax", "lp", "mean_variance", "window_sum_square"),
                      meaning="how each group of elements (those that differ only along `axes`) is normalised, "
                              "element by element: softmax, exp(x - max) / sum(exp(x - max)); log_softmax, "
                              "x - max - log(sum(exp(x - max))); hardmax, 1 at the group's first largest element "
                              "(row-major over the axes, ascending) and 0 elsewhere; lp, x / sqrt(||group||_p^2 + epsilon); "
                              "mean_variance, the formula variable `normalized`: (x - mean) / sqrt(variance + epsilon), "
                              "the population variance, or x - mean where `variance` does not hold; window_sum_square, "
                              "the formula variable `window_sq`: the sum of x^2 over a window of `window` elements along "
                              "each of `axes` around the element (positions off the tensor read nothing)"),
        "axes": Param("expression", meaning="a shape expression giving the list of normalised axes (an array field, "
                                            "or a fixed list such as the last axis)"),
        "p": Param("scalar", modes=("lp",), meaning="the UINT field of lp's order p (1 or 2)"),
        "epsilon": Param("union", modes=("lp", "mean_variance"),
                         meaning="the FLOAT field of epsilon: lp's addend to the norm's square, mean_variance's addend "
                                 "to the variance"),
        "variance": Param("expression", modes=("mean_variance",),
                          meaning="a shape expression: true where the deviation is divided by sqrt(variance + epsilon)"),
        "window": Param("scalar", modes=("window_sum_square",),
                        meaning="the UINT field of the window's extent along each of `axes`: (w - 1) // 2 elements "
                                "before the element and the rest after it (centred where w is odd)"),
        "centred": Param("expression", required=False, modes=("mean_variance",),
                         meaning="a shape expression (optional, absent: true): false where the group's mean is not "
                                 "subtracted (taken as 0: the deviation is x itself and the variance the mean of x^2, "
                                 "a root-mean-square normalization)"),
        "mean_output": Param("output", required=False, modes=("mean_variance",),
                             meaning="an output field (optional) that receives each group's mean (the input's shape "
                                     "with the axes of size 1), judged within the bound keyed `mean_output`"),
        "variance_output": Param("output", required=False, modes=("mean_variance",),
                                 meaning="an output field (optional) that receives each group's population variance "
                                         "(divisor N, Epsilon not added), judged within the bound keyed "
                                         "`variance_output`"),
        "bounds": Param("bounds", required=False,
                        meaning="per mode, the largest |device - exact| a conforming device may show, over the bound "
                                "variables (a mode without one: exact)"),
    },
    bound_variables={
        "N": "the number of elements in the output element's group (the product of the sizes along the axes; "
             "window_sum_square: the window's, w to the power of the number of axes)",
        "eps": "the spacing of the output type at 1 (FLOAT32 2^-23, FLOAT16 2^-10): one faithful rounding step is within "
               "eps relative",
        "tiny": "FLOAT32's smallest normal, 2^-126 (an fp32 denormal input, intermediate or result may be flushed)",
        "tiny_out": "the output type's smallest normal",
        "max_out": "the output type's largest finite value",
        "inf": "+infinity: a bound of inf accepts every result, NaN included",
        "exact": "the exact result of the output element (float64)",
        "arg": "|x - max|: how far the element lies below its group's largest element (the magnitude of the argument "
               "of its shifted exp); 0 where that is not finite (a -inf element, whose result IEEE fixes exactly)",
        "p": "lp's order p",
        "sum_abs": "the group's sum of |x| (finite elements)",
        "sum_sq": "the group's sum of x^2 (finite elements)",
        "norm": "lp: the group's exact p-norm, (sum |x|^p)^(1/p)",
        "divisor": "what the element is divided by, exactly: lp sqrt(norm^2 + epsilon), mean_variance sqrt(variance + "
                   "epsilon)",
        "mean": "mean_variance: |the group's exact mean| (0 where `centred` does not hold)",
        "dev": "mean_variance: |x - mean|, the element's exact deviation",
        "var_eps": "mean_variance: the group's exact population variance plus epsilon",
        "epsilon": "|epsilon| (the FLOAT attribute as the struct holds it)",
        "variance": "mean_variance: 1 where the deviation is divided by sqrt(variance + epsilon), else 0",
    },
    formula_variables={
        "normalized": "mean_variance: (x - mean) / sqrt(variance + epsilon) (or x - mean), exact, per element",
        "window_sq": "window_sum_square: the sum of x^2 over the element's window, exact, per element",
    },
)

GENERATOR_FAMILY = FamilyDeclaration(
    "generator",
    params={
        "mode": Param("choice", choices=("philox4x32_10",),
                      meaning="philox4x32_10: counter-based pseudo-random bits (Salmon et al., SC11, Random123): "
                              "output element i is word i mod 4 of the 10-round Philox-4x32 block of the 128-bit "
                              "counter plus i // 4, under the 64-bit key"),
        "state": Param("input", meaning="the UINT32 state of 6 words: the 128-bit counter in words 0 to 3, the least "
                                        "significant first, then the 64-bit key in words 4 and 5"),
        "values": Param("output", meaning="the output of pseudo-random UINT32 words, row-major"),
        "next_state": Param("output", meaning="the output of the state after the call: the counter advanced by the "
                                              "blocks used, ceil(elements / 4), modulo 2^128; the key unchanged"),
    },
    element_variables={
        "wrapped": "1 where the element's 128-bit counter (or the advanced counter of the next state) passed "
                   "2^128 - 1 and wrapped to 0, else 0",
    },
)

QUANTIZE_DYNAMIC_FAMILY = FamilyDeclaration(
    "quantize_dynamic",
    params={
        "mode": Param("choice", choices=("range_with_zero",),
                      meaning="range_with_zero: the range [min(0, min x), max(0, max x)] of the whole input (ONNX's "
                              "dynamic quantization: zero is always representable) spread over the integer output "
                              "type's range: scale = range / (qmax - qmin), zero point = saturate(round(qmin - "
                              "min / scale)), values = saturate(round(x / scale) + zero point), rounding half to even"),
        "input": Param("input", meaning="the float tensor whose range is taken and which is quantized"),
        "values": Param("output", meaning="the integer output of the quantized input (its type gives qmin and qmax)"),
        "scale": Param("output", meaning="the float output of one element holding the scale"),
        "zero_point": Param("output", meaning="the integer output of one element holding the zero point"),
        "bounds": Param("bounds", required=False,
                        meaning="per mode, the largest |device - exact| of the scale a conforming device may show; "
                                "the zero point and the values are then judged against every scale within it"),
    },
    element_variables={
        "zero_range": "1 where the whole input's range (max(0, max x) - min(0, min x)) is 0, so that the scale is 0 "
                      "and the zero point and the values divide 0 by 0; else 0",
        "range_overflow": "1 where that range exceeds FLOAT32's largest finite value (its subtraction overflows); else 0",
    },
    bound_variables={
        "exact": "the exact scale (float64 of the range over qmax - qmin)",
        "eps": "FLOAT32's spacing at 1, 2^-23: one faithful rounding step is within eps relative",
        "tiny": "FLOAT32's smallest normal, 2^-126 (a denormal input, intermediate or result may be flushed)",
        "inf": "+infinity: a bound of inf accepts every result",
    },
)

RESAMPLE_FAMILY = FamilyDeclaration(
    "resample",
    params={
        "mode": Param("choice", choices=("nearest_neighbor", "linear"), by_enum=True,
                      meaning="how an output element is read from the input at its sampling position x_d = (o_d + "
                              "output offset) / scale_d - input offset per dimension: nearest_neighbor, the element "
                              "at round(x_d) (a .5 tie either way); linear, the weighted sum of the 2^k elements at "
                              "floor(x_d) and floor(x_d) + 1 over the k dimensions whose position is not whole, "
                              "weights 1 - frac and frac; indices clamped to the input (an enum attribute field whose "
                              "member, lower-cased, is the choice, or a fixed choice)"),
        "input": Param("input", meaning="the tensor sampled"),
        "scales": Param("expression", meaning="a shape expression: the list of per-dimension scales (output over "
                                              "input), one per input dimension (a FLOAT array field, or integer factors)"),
        "input_offsets": Param("expression", required=False,
                               meaning="a shape expression: the per-dimension offset subtracted from the scaled "
                                       "position (absent: 0.5 each, pixel centres)"),
        "output_offsets": Param("expression", required=False,
                                meaning="a shape expression: the per-dimension offset added to the output index "
                                        "before the scale divides it (absent: 0.5 each, pixel centres)"),
        "direction": Param("expression", required=False,
                           meaning="a shape expression: true, nearest_neighbor takes ceil(x) (toward increasing "
                                   "indices); false, floor(x); absent, round(x) (either neighbour at a .5 tie)"),
        "adjoint": Param("expression", required=False,
                         meaning="a shape expression: true, the transpose of the resample's linear map (a gradient): "
                                 "`input` is the forward output's gradient dy, the output has the forward input's "
                                 "Sizes, and each element sums dy times the weight it had in the forward pass; "
                                 "absent, false"),
        "antialiased": Param("expression", required=False,
                             meaning="a shape expression: per dimension, true where linear's tent filter is "
                                     "stretched to half-width 1 / scale (antialiased downsampling: every index "
                                     "within it weighed by 1 - |i - x| * scale, normalised by their sum, indices "
                                     "clamped); absent, false each"),
        "bounds": Param("bounds", required=False,
                        meaning="per mode, the largest |device - exact| a conforming device may show, over the bound "
                                "variables (a mode without one: exact, a copy)"),
    },
    element_variables={
        "tie": "1 where a nearest_neighbor position lies within its computation error of a .5 tie on some dimension "
               "(either neighbour is the nearest), else 0",
        "rounds_up": "1 where a nearest_neighbor position's fraction is .5 or more on some dimension with a next "
                     "element (round(x) is floor(x) + 1 there, not floor(x)), else 0",
        "past_edge": "1 where a linear position lies before the first or past the last element on some dimension "
                     "of more than one element (the page's clamped edges), else 0",
        "stretched": "1 where a linear output element's filter is stretched (`antialiased`) along some dimension of "
                     "more than one element, else 0",
        "nonfinite_near": "1 where an element of a linear output element's 4^k neighbourhood (floor(x) - 1 to "
                          "floor(x) + 2 per interpolated dimension, o - 1 to o + 1 along a copied one, clamped: what a "
                          "device may read with a zero or tiny weight, at an edge or through its position's error) "
                          "is NaN or infinite, else 0",
    },
    bound_variables={
        "D": "the number of dimensions whose sampling position is not whole (linear: 2^D elements are weighed)",
        "terms": "2^D, the number of weighted elements",
        "pos_err": "the sum over those dimensions of how far the device's FLOAT32 position may lie from the exact "
                   "one: 4 * 2^-23 * (|(o + output offset) / scale| + |input offset|) each",
        "spread": "the largest minus the smallest finite input element of the 4^D neighbourhood (floor(x) - 1 to "
                  "floor(x) + 2 per dimension, clamped): how much a position error (or the other floor at a whole "
                  "position) can move the result per unit",
        "max_abs": "the largest |x| of the 2^D weighted elements (finite)",
        "N": "adjoint: the contributions an element may receive (every tap a forward position within its FLOAT32 error "
             "can reach)",
        "sum_abs": "adjoint: the sum of |w dy| over its contributions (exact weights)",
        "pos_dy": "adjoint: the sum over those taps of |dy| times the forward weight's own error (the position's, pos_err)",
        "tie_span": "adjoint, nearest_neighbor: half the width of the interval the tied contributions span (each may go "
                    "to either neighbour; `exact` is the interval's midpoint)",
        "weight_err": "linear with a stretched (antialiased) filter: the sum over its dimensions of n + 1 + 3 n / W, "
                      "the normalised weights' error in eps steps (n the indices the filter reaches, W their raw "
                      "weights' sum); 0 for the plain tent, whose steps the bound counts per dimension",
        "eps": "the spacing of the output type at 1 (FLOAT32 2^-23, FLOAT16 2^-10): one faithful rounding step is within "
               "eps relative",
        "tiny": "FLOAT32's smallest normal, 2^-126 (an fp32 denormal input, intermediate or result may be flushed)",
        "tiny_out": "the output type's smallest normal",
        "max_out": "the output type's largest finite value",
        "inf": "+infinity: a bound of inf accepts every result, NaN included",
        "exact": "the exact result (float64)",
    },
)

GRADIENT_FAMILY = FamilyDeclaration(
    "gradient",
    params={
        "mode": Param("choice", choices=("strided_window", "average", "max", "mean_variance", "roi_sampled",
                                          "window_sum_square"),
                      meaning="the forward computation whose adjoint (the transpose of its index map) is taken: "
                              "strided_window, a strided copy (each incoming gradient element moved back to the "
                              "input position it was copied from, zeros elsewhere); average, an average pooling "
                              "(each incoming element over its window's divisor added into every input position "
                              "the window reads); max, a max pooling (each incoming element added into the "
                              "position of its window's largest input element, the lowest index of equal ones); "
                              "mean_variance, the affine normalization y = scale (x - mean) / sqrt(variance + "
                              "epsilon) + bias with given statistics, broadcast along `axes`: the output dy scale / "
                              "sqrt(variance + epsilon), and optionally the sums over `axes` of dy (x - mean) / "
                              "sqrt(variance + epsilon) (the scale's gradient) and of dy (the bias's); roi_sampled, "
                              "the roi family's sampled mode (each incoming element's share, 1 / samples or all of "
                              "it to the cell's largest sample, times each sample's interpolation weights, added at "
                              "the sample's neighbours); window_sum_square, the local normalization y = x (bias + alpha / "
                              "window S)^-beta, S the sum of x^2 over a window of `window` elements along each of "
                              "`axes` (the normalize family's window_sum_square): dy (bias + alpha / window S)^-beta "
                              "- 2 alpha beta / window x sum over the windows holding the element of dy x (bias + "
                              "alpha / window S)^(-beta - 1)"),
        "gradient": Param("input", meaning="the incoming gradient, shaped like the forward's output"),
        "input": Param("input", modes=("max", "mean_variance", "roi_sampled", "window_sum_square"),
                       meaning="the forward's input: max, whose window maxima say where each gradient element goes; "
                               "mean_variance, whose deviations from the mean the scale's gradient sums; roi_sampled, "
                               "whose samples' largest takes a max cell's gradient (may be absent for an average)"),
        "rois": Param("input", modes=("roi_sampled",), meaning="the forward's regions [x1, y1, x2, y2], one row each"),
        "batch_indices": Param("input", modes=("roi_sampled",), meaning="the forward's batch index per region"),
        "spatial_scale": Param("expression", modes=("roi_sampled",), meaning="as the roi family's: [scale_y, scale_x]"),
        "average": Param("expression", required=False, modes=("roi_sampled",), meaning="as the roi family's"),
        "nearest": Param("expression", required=False, modes=("roi_sampled",), meaning="as the roi family's"),
        "samples": Param("expression", required=False, modes=("roi_sampled",), meaning="as the roi family's"),
        "input_offset": Param("expression", required=False, modes=("roi_sampled",), meaning="as the roi family's"),
        "output_offset": Param("expression", required=False, modes=("roi_sampled",), meaning="as the roi family's"),
        "align_corners": Param("expression", required=False, modes=("roi_sampled",), meaning="as the roi family's"),
        "roi_gradient": Param("output", required=False, modes=("roi_sampled",),
                              meaning="an output (optional) for the regions' gradient: written as zeros, judged only "
                                      "by the spec's unspecified rules that name it"),
        "mean": Param("input", modes=("mean_variance",), meaning="the forward's mean (size 1 along `axes`)"),
        "variance": Param("input", modes=("mean_variance",), meaning="the forward's variance (size 1 along `axes`)"),
        "scale": Param("input", modes=("mean_variance",), meaning="the forward's scale (size 1 along `axes`)"),
        "epsilon": Param("union", modes=("mean_variance",), meaning="the FLOAT field of epsilon, added to the variance"),
        "window": Param("scalar", modes=("window_sum_square",),
                        meaning="the UINT field of the window's extent along each of `axes` ((w - 1) // 2 elements "
                                "before the element and the rest after it, as the normalize family's)"),
        "alpha": Param("union", modes=("window_sum_square",), meaning="the FLOAT field of alpha (divided by `window`)"),
        "beta": Param("union", modes=("window_sum_square",), meaning="the FLOAT field of the exponent beta"),
        "bias": Param("union", modes=("window_sum_square",), meaning="the FLOAT field of the bias added to the scaled sum"),
        "axes": Param("expression", modes=("mean_variance", "window_sum_square"),
                      meaning="a shape expression: the list of axes the statistics are broadcast along (and the "
                              "parameter gradients summed over)"),
        "batch": Param("expression", required=False, modes=("mean_variance",),
                       meaning="a shape expression (optional, absent: false): true where the statistics are the "
                               "group's own (the forward computed the mean and the variance from x), so that the "
                               "input's gradient carries the terms through them: scale / sqrt(w) (dy - mean(dy) - "
                               "(x - mean) mean(dy (x - mean)) / w), each mean over the group"),
        "scale_gradient": Param("output", required=False, modes=("mean_variance",),
                                meaning="an output (optional) receiving the sum over `axes` of dy (x - mean) / "
                                        "sqrt(variance + epsilon), judged within the bound keyed `scale_gradient`"),
        "bias_gradient": Param("output", required=False, modes=("mean_variance",),
                               meaning="an output (optional) receiving the sum over `axes` of dy, judged within the "
                                       "bound keyed `bias_gradient`"),
        "offsets": Param("array", modes=("strided_window",), meaning="the forward window's first element per dimension"),
        "sizes": Param("array", modes=("strided_window",), meaning="the forward window's extent per dimension"),
        "strides": Param("array", modes=("strided_window", "average", "max"),
                         meaning="the forward's step per dimension (strided_window: INT, its sign picks "
                                 "the end the copy starts from; a pooling's per spatial dimension)"),
        "window_size": Param("array", modes=("average", "max"), meaning="the pooling window's extent per spatial dimension"),
        "start": Param("array", modes=("average", "max"), meaning="the pooling's padding before, per spatial dimension"),
        "end": Param("array", modes=("average", "max"), meaning="the pooling's padding after, per spatial dimension"),
        "dilations": Param("array", required=False, modes=("average", "max"),
                           meaning="the step between window elements per spatial dimension (absent: 1)"),
        "include_padding": Param("expression", required=False, modes=("average",),
                                 meaning="true: a window's divisor is prod(window_size), padding included; false or "
                                         "absent: the count of its elements on the input"),
        "bounds": Param("bounds", required=False,
                        meaning="per mode, the largest |device - exact| a conforming device may show over the bound "
                                "variables (a mode without one: exact, bit for bit where the spec compares bitwise)"),
    },
    element_variables={
        "nan_window": "max: 1 at the output positions some window reads whose elements on the input include a NaN "
                      "(where such a window's gradient goes is the comparison's), else 0",
        "lowest_window": "max: 1 at the output positions some window reads whose largest element is -inf or the type's "
                         "lowest finite value (a device that starts its maximum from the lowest finite value with the "
                         "window's first index routes such a window to its first element), else 0",
        "contributions": "the number of incoming gradient elements added into the output element (N)",
        "batch_invalid": "roi_sampled: 1 everywhere when some region's batch index is not a whole number in [0, N)",
        "nonfinite_roi": "roi_sampled: 1 everywhere when some region's scaled corner is not finite or beyond 2^24",
        "samples_open": "roi_sampled: 1 over the batch of a region whose sample count is open (the roi family's)",
        "past_edge": "roi_sampled: 1 at the (clamped) neighbours of a sample past the input's edge (the roi family's)",
        "route_open": "roi_sampled, max: 1 at every neighbour of a cell whose largest sample is not determined (another "
                      "sample within the forward's error of it, a non-finite value, a sample past the edge)",
        "nonfinite_gradient": "roi_sampled: 1 at the neighbours a non-finite incoming gradient share touches (with a "
                              "weight of 0 too: its product is NaN or skipped)",
        "nonfinite_window": "window_sum_square: 1 where an infinite x or dy lies in the element's window or in a window "
                            "holding it (whether an infinity meets a 0 depends on the order of the steps), else 0",
    },
    bound_variables={
        "N": "the number of incoming gradient terms added into the output element (mean_variance: 1 for the "
             "output, the group's size for the sums)",
        "sum_abs": "the sum of |term| over its finite terms (average: |dy| / divisor each; mean_variance: "
                   "|dy scale| / sqrt(w), |dy (x - mean)| / sqrt(w) or |dy|)",
        "max_abs": "the largest |term| over its finite terms",
        "sum_dy": "roi_sampled: the sum of |dy share| over the terms a weight (or a weight of 0 a position error "
                  "makes non-zero) adds here: what an error in the weights multiplies",
        "pos_err": "roi_sampled: the largest FLOAT32 sample position error (y + x) of the terms added here",
        "ties": "roi_sampled, nearest: the sum of |dy share| of samples within their error of a .5 tie that may land "
                "here or elsewhere",
        "var_eps": "mean_variance: |w|, w = variance + epsilon exactly",
        "variance_abs": "mean_variance: |variance|",
        "epsilon": "mean_variance: |epsilon| (the FLOAT attribute as the struct holds it)",
        "partial": "mean_variance, window_sum_square: the largest magnitude any evaluation order passes through (a product of two of "
                   "the term's factors, a deviation x - mean, a term, the sum of |term|): where twice it reaches "
                   "the type's largest finite value an intermediate may overflow",
        "factor": "mean_variance with batch: |scale| / sqrt(|w|)",
        "inner": "mean_variance with batch: |dy| + |mean(dy)| + |(x - mean) mean(dy (x - mean)) / w|, the magnitudes the "
                 "two subtractions inside the input's gradient read",
        "mean_abs_dy": "mean_variance with batch: the group's sum of |dy| over N",
        "mean_abs_product": "mean_variance with batch: the group's sum of |dy (x - mean)| over N",
        "dev": "mean_variance with batch: |x - mean|",
        "mean_product": "mean_variance with batch: |mean(dy (x - mean))| over the group",
        "amp": "mean_variance, window_sum_square: the largest product over a term's factors (dy, scale or x - mean, 1 / sqrt(w)) of "
               "max(1, |factor|): how much an absolute error (a flush, a FLOAT16 subnormal step) made at any step "
               "is multiplied by the later ones",
        "direct": "window_sum_square: |dy D^-beta|, D = bias + alpha / window S (the first term)",
        "adjoint": "window_sum_square: |2 alpha beta / window| |x| times the sum of |dy x D^(-beta - 1)| over the windows "
                   "holding the element (a bound of the second term)",
        "base_rel": "window_sum_square: the largest (|bias| + |alpha / window| S) / |D| over the element's D and those of "
                    "the windows holding it (how much D's rounding weighs relative to D; 1 without cancellation)",
        "sum_rel": "window_sum_square: the largest |alpha / window| / |D| over the same D's (what an absolute error of S "
                   "weighs relative to D)",
        "log_base": "window_sum_square: the largest max(1, |log2 |D||) over the same D's (pow's log2 error grows with it)",
        "beta": "window_sum_square: |beta|",
        "exact": "the exact result (float64)",
        "eps": "the spacing of the output type at 1 (FLOAT32 2^-23, FLOAT16 2^-10): one faithful rounding step is within "
               "eps relative",
        "tiny": "FLOAT32's smallest normal, 2^-126 (an fp32 denormal input, intermediate or result may be flushed)",
        "tiny_out": "the output type's smallest normal",
        "max_out": "the output type's largest finite value",
        "inf": "+infinity: a bound of inf accepts every result, NaN included",
    },
)

ROI_FAMILY = FamilyDeclaration(
    "roi",
    params={
        "mode": Param("choice", choices=("integer_bins", "sampled"),
                      meaning="how a region of interest becomes a grid of output elements {NumROIs, C, H, W}: "
                              "integer_bins, the region's corners scaled and rounded to whole input indices, cut into "
                              "H x W bins by integer division (start floor, end ceiling, clamped to the input), each "
                              "output element the largest input element of its bin; sampled, the scaled region cut "
                              "into H x W cells, each reduced over a grid of sample points read by interpolation"),
        "input": Param("input", meaning="the tensor {N, C, height, width} the regions lie in"),
        "rois": Param("input", meaning="the regions, one row per region (its last dimension): [batch, x1, y1, x2, y2] "
                                       "without `batch_indices`, else [x1, y1, x2, y2]"),
        "batch_indices": Param("input", required=False,
                               meaning="the batch index of each region (absent: the region row's first column)"),
        "spatial_scale": Param("expression",
                               meaning="a shape expression: [scale_y, scale_x], what the region's y and x "
                                       "coordinates are multiplied by"),
        "average": Param("expression", required=False, modes=("sampled",),
                         meaning="a shape expression: true, a cell's samples are averaged; false, their largest"),
        "nearest": Param("expression", required=False, modes=("sampled",),
                         meaning="a shape expression: true, a sample reads the nearest element; false, the "
                                 "bilinear weighting of its 4 neighbours"),
        "samples": Param("expression", required=False, modes=("sampled",),
                         meaning="a shape expression: [minimum, maximum] samples per cell and dimension"),
        "input_offset": Param("expression", required=False, modes=("sampled",),
                              meaning="a shape expression: subtracted from the scaled position (absent 0.5: pixel "
                                      "centres)"),
        "output_offset": Param("expression", required=False, modes=("sampled",),
                               meaning="a shape expression: subtracted from the sample index (absent -0.5: pixel "
                                       "centres)"),
        "align_corners": Param("expression", required=False, modes=("sampled",),
                               meaning="a shape expression: true, the samples reach the region's corners"),
        "out_of_bounds": Param("union", required=False, modes=("sampled",),
                               meaning="the FLOAT field a sample outside the input reads"),
        "bounds": Param("bounds", required=False,
                        meaning="per mode, the largest |device - exact| a conforming device may show (absent: exact)"),
    },
    element_variables={
        "batch_invalid": "1 where the region's batch index is not a whole number in [0, N), else 0",
        "inverted": "1 where the region's rounded (integer_bins) end lies before its start on some dimension, else 0",
        "rounding_tie": "1 where a scaled corner lies within its FLOAT32 product's error of a .5 tie (integer_bins: "
                        "round() may go either way), else 0",
        "empty_bin": "1 where the bin, clamped to the input, holds no element, else 0",
        "nan_in_bin": "1 where the bin (or a sample's neighbourhood) holds a NaN, else 0",
        "nonfinite_roi": "1 where a region coordinate (or its scaled value) is not finite or beyond 2^24, else 0",
        "samples_open": "sampled: 1 where a cell's sample count is not one the page names (size / cells a fraction "
                        "between the minimum and the maximum, 0, or a minimum above the maximum), else 0",
        "past_edge": "sampled: 1 where a sample lies outside [0, size - 1] on some dimension (within its error), "
                     "else 0",
    },
    bound_variables={
        "terms": "the number of samples a cell reduces",
        "ties": "nearest: how far taking the other neighbour of the samples within their error of a .5 tie may move "
                "the cell's result (0 elsewhere)",
        "pos_err": "how far a device's FLOAT32 sample position may lie from the exact one, summed over y and x",
        "spread": "the largest minus the smallest finite element around the cell's samples",
        "max_abs": "the largest |x| a cell's samples weigh",
        "eps": "the spacing of the output type at 1",
        "tiny": "FLOAT32's smallest normal, 2^-126",
        "tiny_out": "the output type's smallest normal",
        "max_out": "the output type's largest finite value",
        "inf": "+infinity: a bound of inf accepts every result",
        "exact": "the exact result (float64)",
    },
)

# Every family, by name: what the spec loader checks a `formula.family` against, and what the
# reference's plug-ins (harness.reference.families, one module each) declare they compute.
RECURRENT_FAMILY = FamilyDeclaration(
    "recurrent",
    params={
        "mode": Param("choice", choices=("rnn", "gru", "lstm"),
                      meaning="rnn: per step t and direction, H_t = f(X_t W^T + H_(t-1) R^T + Wb + Rb), f the direction's "
                              "activation from the array; gru: gates z, r (activation f) and h (activation g) stacked in "
                              "W, R and the biases, H_t = (1 - z) h + z H_(t-1); lstm: gates i, o, f (activation f) and c "
                              "(activation g) stacked in that order, the cell C_t = f C_(t-1) + i c and H_t = o h(C_t) "
                              "(harness/reference/families/recurrent.py)"),
        "input": Param("input", meaning="X {1, seq_length, batch, input_size}"),
        "weight": Param("input", meaning="W {1, directions, gates * hidden, input_size}"),
        "recurrence": Param("input", meaning="R {1, directions, gates * hidden, hidden}"),
        "bias": Param("input", required=False, meaning="{1, 1, directions, 2 * gates * hidden}: Wb then Rb (absent: 0)"),
        "hidden_init": Param("input", required=False, meaning="H_(-1) {1, directions, batch, hidden} (absent: 0)"),
        "sequence_lengths": Param("input", required=False,
                                  meaning="{1, 1, 1, batch} UINT32: each batch row's steps (absent: seq_length); a backward "
                                          "direction starts at its row's last step"),
        "sequence": Param("output", meaning="every step's H_t {seq_length, directions, batch, hidden}"),
        "single": Param("output", meaning="each direction's last H_t {1, directions, batch, hidden}"),
        "activations": Param("activations", meaning="the activation array field: per direction, the mode's activations in order"),
        "backward": Param("expression", meaning="true: one direction, run from the last step to the first"),
        "linear_before_reset": Param("expression", modes=("gru",),
                                     meaning="true: the hidden gate applies R_h (and its bias) before the reset gate's product"),
        "bidirectional": Param("expression", meaning="true: two directions, forward (index 0) and backward (index 1)"),
        "cell_init": Param("input", modes=("lstm",), meaning="C_(-1) {1, directions, batch, hidden} (absent: 0)"),
        "peephole": Param("input", modes=("lstm",), meaning="{1, 1, directions, 3 * hidden}: P_i, P_o, P_f (absent: 0)"),
        "cell_single": Param("output", modes=("lstm",), meaning="each direction's last C_t {1, directions, batch, hidden}"),
        "clip": Param("union", modes=("lstm",), meaning="the clip threshold field: the four gates' activation inputs are "
                                                       "clipped to [-clip, clip] where `use_clip` holds (not h's)"),
        "use_clip": Param("expression", modes=("lstm",), meaning="true: the gates' activation inputs are clipped"),
        "couple_input_forget": Param("expression", modes=("lstm",), meaning="true: the forget gate is 1 - i"),
        "bounds": Param("bounds", required=False,
                        meaning="per mode, the error of one step's pre-activation sums; `activation`: an activation's own "
                                "error; `blend`: the rounding of a gated blend of states (over sum_abs, the blend's "
                                "|parts|); the plug-in propagates them through the steps"),
    },
    element_variables={
        "past_length": "1 where the element's step lies at or past its batch row's sequence length, else 0",
        "length_open": "1 where its batch row's sequence length is 0 or beyond seq_length, else 0",
        "nonfinite_in": "1 where a non-finite value (an input, or a step's result) feeds the element, else 0",
        "clip_open": "1 where the gates' inputs are clipped to a negative or NaN threshold (lstm), else 0",
    },
    bound_variables={
        "K": "the terms of one pre-activation sum: input_size + hidden + 2 (the two biases)",
        "sum_abs": "the sum of |term| over those K terms (|x_i w_i|, |h_j r_j|, |Wb|, |Rb|), exact values",
        "sum_inputs": "the sum of |factor| over the K terms' factors (what flushing an fp32 denormal factor can move)",
        "y": "the activation's exact output at the step",
        "z": "its exact input (the pre-activation)",
        "slope": "the activation's largest |f(z') - f(z)| / |z' - z| over z' within the propagated error (0 when that is 0)",
        "eps": "the spacing of the output type at 1 (FLOAT32 2^-23, FLOAT16 2^-10)",
        "tiny": "FLOAT32's smallest normal, 2^-126",
        "tiny_out": "the output type's smallest normal",
        "max_out": "the output type's largest finite value",
        "inf": "+infinity: a bound of inf accepts every result",
    },
    bound_keys=("activation", "blend"),
)


ATTENTION_FAMILY = FamilyDeclaration(
    "attention",
    params={
        "query": Param("input", required=False, meaning="Q [batch, sequence, heads * head_size] (leading 1s allowed)"),
        "key": Param("input", required=False, meaning="K [batch, kv_sequence, heads * head_size] (leading 1s allowed)"),
        "value": Param("input", required=False,
                       meaning="V [batch, kv_sequence, heads * value_head_size] (leading 1s allowed)"),
        "stacked_query_key": Param("input", required=False,
                                   meaning="Q and K stacked [batch, sequence, heads, 2, head_size] (index 0 Q, 1 K)"),
        "stacked_key_value": Param("input", required=False,
                                   meaning="K and V stacked [batch, kv_sequence, heads, 2, head_size] (index 0 K, 1 V)"),
        "stacked_query_key_value": Param("input", required=False,
                                         meaning="Q, K and V stacked [batch, sequence, heads, 3, head_size]"),
        "bias": Param("input", required=False,
                      meaning="[hidden + hidden + value_hidden]: added to Q, K and V (in that order) before the first "
                              "product; not to the past key and value"),
        "mask": Param("input", required=False, meaning="the mask, read as `mask_type` says"),
        "position_bias": Param("input", required=False,
                               meaning="[batch, heads, sequence, total_sequence] (right-aligned): added to the scaled "
                                       "scores before the mask"),
        "past_key": Param("input", required=False,
                          meaning="[batch, heads, past_sequence, head_size]: put before K along the sequence"),
        "past_value": Param("input", required=False,
                            meaning="[batch, heads, past_sequence, value_head_size]: put before V along the sequence"),
        "output": Param("output", meaning="[batch, sequence, value_hidden]: softmax(scores) x V, heads side by side"),
        "present_key": Param("output", required=False,
                             meaning="[batch, heads, total_sequence, head_size]: the past key then K, per head"),
        "present_value": Param("output", required=False,
                               meaning="[batch, heads, total_sequence, value_head_size]: the past value then V"),
        "scale": Param("union", meaning="the FLOAT field the product Q K^T is multiplied by"),
        "mask_filter": Param("union", meaning="the FLOAT field added to (or, where `mask_set` holds, written over) "
                                              "a masked score"),
        "heads": Param("scalar", meaning="the UINT field of the head count (the query's, where `kv_heads` is given)"),
        "kv_heads": Param("scalar", required=False,
                          meaning="the UINT field of the key's and value's head count, where it may differ from the "
                                  "query's (grouped-query attention): query head h reads key and value head "
                                  "h // (heads // kv_heads); the bias, the past and the present outputs hold the "
                                  "key's and value's heads (absent: `heads`)"),
        "past_sequence_lengths": Param("input", required=False,
                                       meaning="a tensor the family does not read: the element variable "
                                               "`past_lengths_given` tells the spec's rules where it is present"),
        "mask_type": Param("choice", choices=("none", "key_sequence_length", "key_sequence_end_start",
                                              "key_query_sequence_length_start_end", "boolean"), by_enum=True,
                           meaning="how the mask reads: none; key_sequence_length, [1, batch] lengths, key positions "
                                   "from the length on masked; key_sequence_end_start, [2, batch] ends (exclusive) "
                                   "then starts (inclusive), key positions outside masked; "
                                   "key_query_sequence_length_start_end, [3 batch + 2]: the first batch values are "
                                   "key lengths (read as key_sequence_length's), the query and key starts and ends "
                                   "after them are not read (the spec's rule leaves the output open); boolean, "
                                   "[batch, heads, sequence, total_sequence] (right-aligned), 0 masks a score"),
        "mask_set": Param("expression", required=False,
                          meaning="true: a masked score is set to the filter value rather than the filter value "
                                  "added to it (absent: added); the element variable `mask_reading` tells the spec's "
                                  "rules where the two readings differ"),
        "bounds": Param("bounds", required=False,
                        meaning="`score`: one score's error (a dot product of head_size terms, scaled, plus the "
                                "position bias and the mask); `softmax`: the softmax's own error over its scores; "
                                "`weighted_sum`: the product of the weights and V; the plug-in propagates them"),
    },
    element_variables={
        "nonfinite_in": "1 where a NaN or an infinity feeds the output element (a score that is NaN or +inf, a row "
                        "of -inf scores only, a non-finite V or past value), else 0",
        "mask_reading": "1 where the output element's exact value differs between a masked score set to the "
                        "filter value and the filter value added to it, else 0",
        "mask_value_open": "1 where the mask holds a value the page gives no meaning: a boolean mask element other "
                           "than 0 or 1, a length, start or end below 0 or beyond the total sequence, else 0",
        "biased": "1 at a present key or value element that a non-zero bias element was added to, else 0",
        "past_lengths_given": "1 at every output element where the `past_sequence_lengths` tensor is present, else 0",
    },
    bound_variables={
        "K": "the terms of one sum: head_size + 2 for a score (the products, the position bias, the mask), the "
             "total sequence for the weighted sum",
        "sum_abs": "the sum of |term| over its finite terms (exact values)",
        "sum_inputs": "the sum of |factor| over its terms' factors (what flushing an fp32 denormal factor can move)",
        "N": "the softmax's length, the total sequence",
        "arg": "|score - the row's largest score| (0 where not finite)",
        "exact": "the exact value (the softmax weight for `softmax`)",
        "eps": "the spacing of the output type at 1 (FLOAT32 2^-23, FLOAT16 2^-10)",
        "tiny": "FLOAT32's smallest normal, 2^-126",
        "tiny_out": "the output type's smallest normal",
        "max_out": "the output type's largest finite value",
        "inf": "+infinity: a bound of inf accepts every result",
    },
    bound_keys=("score", "softmax", "weighted_sum"),
)


DECLARATIONS: dict[str, FamilyDeclaration] = {d.name: d for d in (REDUCE_FAMILY, SORT_FAMILY, DATA_MOVEMENT_FAMILY, GATHER_FAMILY,
                                                                    MATMUL_FAMILY, WINDOW_FAMILY, SCAN_FAMILY,
                                                                    NORMALIZE_FAMILY, GENERATOR_FAMILY,
                                                                    QUANTIZE_DYNAMIC_FAMILY, RESAMPLE_FAMILY,
                                                                    GRADIENT_FAMILY, ROI_FAMILY, RECURRENT_FAMILY,
                                                                    ATTENTION_FAMILY)}


@dataclass(frozen=True)
class Bound:
    """An error bound of one combine choice: `atol` per output element, and its source."""

    atol: Formula
    why: str


@dataclass(frozen=True)
class FamilySpec:
    """A spec's `formula.family`: the plug-in's name and its checked parameters."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)  # str for choice/array, ShapeExpr for expression
    enum_choices: dict[str, tuple[str, dict[int, str]]] = field(default_factory=dict)  # param -> (field, value -> choice)

    def expression(self, key: str) -> ShapeExpr | None:
        value = self.params.get(key)
        return value if isinstance(value, ShapeExpr) else None

    def choice(self, key: str, names: dict[str, Any]) -> str:
        """The choice of parameter `key` for a descriptor whose attributes are `names`
        (harness.model.facts.attribute_names): fixed, or the member its enum field holds."""
        if key in self.enum_choices:
            field_name, by_value = self.enum_choices[key]
            value = names[field_name]
            if value not in by_value:
                raise ValueError(f"{field_name} = {value!r} is no member of its enum")
            return by_value[value]
        return self.params[key]

    def choices(self, key: str) -> tuple[str, ...]:
        """Every choice parameter `key` can take."""
        if key in self.enum_choices:
            return tuple(dict.fromkeys(self.enum_choices[key][1].values()))
        return (self.params[key],)

    def bound(self, choice: str) -> Bound | None:
        return self.params.get("bounds", {}).get(choice)


def _read_bounds(value: Any, name: str, combine: tuple[str, ...]) -> dict[str, Bound]:
    """`bounds`: {choice: {atol: formula, why: text}}, each formula over the family's bound
    variables (all floats), keyed by the choices that `combine` can take (or, for a family without
    `combine`, by its formula variables)."""
    if not isinstance(value, dict):
        raise FormulaError("bounds: expected a mapping of combine choices to {atol, why}")
    variables = DECLARATIONS[name].bound_variables
    facts = KindFacts(variables={v: frozenset({FLOAT}) for v in variables}, tensors={},
                      why={v: f"{v} is a float bound variable" for v in variables})
    out = {}
    for choice, entry in value.items():
        if choice not in combine:
            raise FormulaError(f"bounds: {choice!r} is not a choice combine can take ({', '.join(combine)})")
        if not isinstance(entry, dict) or set(entry) != {"atol", "why"}:
            raise FormulaError(f"bounds.{choice}: expected {{atol: formula, why: text}}")
        formula = parse_formula(str(entry["atol"]))
        unknown = sorted(formula.names - set(variables))
        if unknown or formula.tensor_names:
            raise FormulaError(f"bounds.{choice}: unknown name(s) {', '.join(unknown or sorted(formula.tensor_names))}; "
                               f"the bound variables are {', '.join(variables)}")
        check_kinds(formula, facts)
        out[choice] = Bound(formula, str(entry["why"]))
    return out


def formula_variables(name: str | None) -> dict[str, str]:
    """The values family `name` computes that the spec's expression reads ({} for no family)."""
    return DECLARATIONS[name].formula_variables if name else {}


def element_variables(name: str | None) -> dict[str, str]:
    """The names family `name` gives the spec's unspecified rules ({} for no family)."""
    return DECLARATIONS[name].element_variables if name else {}


def bound_variables(name: str | None) -> dict[str, str]:
    """The names family `name`'s `bounds` formulas read per output element ({} for no family)."""
    return DECLARATIONS[name].bound_variables if name else {}


ELEMENT_KIND = INTEGER


def read_family(raw: dict, fields: list, names: set[str], tensors: set[str]) -> FamilySpec:
    """Check `raw` against the family's declaration; raise FormulaError saying what is wrong."""
    name = raw["name"]
    declaration = DECLARATIONS.get(name)
    if declaration is None:
        raise FormulaError(f"unknown family {name!r}; known: {', '.join(sorted(DECLARATIONS))}")
    declared = declaration.params
    params: dict[str, Any] = {}
    unknown = sorted(set(raw) - set(declared) - {"name"})
    if unknown:
        raise FormulaError(f"family {name} has no parameter {', '.join(unknown)}; it takes {', '.join(sorted(declared))}")
    arrays = {f.name for f in fields if getattr(f, "is_array", False)}
    scalars = {f.name for f in fields if f.role == "attribute" and f.c_type in ("UINT", "INT") and not f.is_count}
    outputs = {f.name for f in fields if f.role == "output"}
    inputs = {f.name for f in fields if f.role == "input"}
    enums = {f.name: f.enum for f in fields if getattr(f, "enum", None)}
    enum_choices: dict[str, tuple[str, dict[int, str]]] = {}
    # a constant's field: a DML_SCALAR_UNION, or a FLOAT that the operator converts
    unions = {f.name for f in fields if getattr(f, "is_scalar_union", False) or (f.role == "attribute" and f.c_type == "FLOAT")}
    tensor_arrays = {f.array_of for f in fields if getattr(f, "array_of", None)}
    activation_arrays = {f.name for f in fields if getattr(f, "is_activation_array", False)}
    mode = raw.get(declaration.mode_key)
    mode_param = declared.get(declaration.mode_key)
    if mode is None and mode_param is not None and not mode_param.required and mode_param.choices:
        mode = mode_param.choices[0]
    for key, param in declared.items():
        if param.modes and mode not in param.modes:
            if key in raw:
                raise FormulaError(f"family {name}: {key!r} is only for mode {', '.join(param.modes)}")
            continue
        if key not in raw:
            if param.required:
                raise FormulaError(f"family {name} needs {key!r} ({param.meaning})")
            continue
        value = raw[key]
        if param.kind == "choice" and param.by_enum and value in enums:
            unknown = [m for m in enums[value] if m.lower() not in param.choices]
            if unknown:
                raise FormulaError(f"{key}: {value}'s member(s) {', '.join(unknown)} are no choice of {key} "
                                   f"({', '.join(param.choices)})")
            enum_choices[key] = (value, {v: m.lower() for m, v in enums[value].items()})
            params[key] = value
        elif param.kind == "choice":
            if value not in param.choices:
                also = f", or an enum attribute field ({', '.join(enums) or 'none'})" if param.by_enum else ""
                raise FormulaError(f"{key}: {value!r} is not one of {', '.join(param.choices)}{also}")
            params[key] = value
        elif param.kind == "bounds":
            continue  # read below, once the choices of combine are known
        elif param.kind in ("array", "scalar", "output", "input", "union", "tensor_array", "activations"):
            allowed = {"array": arrays, "scalar": scalars, "output": outputs, "input": inputs, "union": unions,
                       "tensor_array": tensor_arrays, "activations": activation_arrays}[param.kind]
            if value not in allowed:
                raise FormulaError(f"{key}: {value!r} is not {'an' if param.kind != 'scalar' else 'a'} {param.kind} field "
                                   f"({', '.join(sorted(allowed)) or 'none'})")
            params[key] = value
        else:
            params[key] = parse_shape_expr(str(value), names, tensors)
    family = FamilySpec(name, params, enum_choices)
    if "bounds" in raw:
        keys = (family.choices("combine") if "combine" in params else family.choices("mode") if "mode" in params
                else tuple(formula_variables(name)))
        # an optional output a family fills beside its main one (a statistic) has its own bound, keyed by the parameter
        keys = tuple(keys) + tuple(k for k, p in declaration.params.items() if p.kind == "output" and not p.required
                                   and k in params) + declaration.bound_keys
        params["bounds"] = _read_bounds(raw["bounds"], name, keys)
    return family
