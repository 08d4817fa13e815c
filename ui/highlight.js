// A small CUDA/C++ highlighter: splits source into spans by token class (comment,
// string, preprocessor, keyword, type, CUDA built-in, number). Text only ever becomes
// text nodes.
import {h} from './dom.js';

const KEYWORDS = new Set(('if else for while do switch case default break continue return goto ' +
  'sizeof typedef struct union enum class template typename namespace using static const ' +
  'constexpr volatile extern inline register auto restrict __restrict__ __restrict ' +
  'true false nullptr operator public private protected virtual static_assert ' +
  '__global__ __device__ __host__ __shared__ __constant__ __managed__ __forceinline__ ' +
  '__noinline__ __launch_bounds__ __align__ __grid_constant__ asm volatile').split(' '));
const TYPES = new Set(('void bool char short int long float double signed unsigned size_t ' +
  'int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t half __half __half2 ' +
  '__nv_bfloat16 __nv_bfloat162 float2 float3 float4 int2 int3 int4 uint2 uint4 dim3 ' +
  'double2 longlong2 char4 uchar4').split(' '));
const BUILTINS = /^(threadIdx|blockIdx|blockDim|gridDim|warpSize|__syncthreads\w*|__syncwarp|__shfl\w*|__ldg|__expf|__logf|__fdividef|__float2\w*|__int2\w*|__half2\w*|atomic\w+|__fmaf\w*|rsqrtf|sqrtf|expf|logf|fmaxf|fminf|fabsf|tanhf|erff|__popc\w*|__ballot_sync|__any_sync|__all_sync|cp_async\w*|__pipeline\w*)$/;

// One alternative per token class, tried in order at each position.
const TOKEN = new RegExp([
  String.raw`(\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$))`,        // 1 comment
  String.raw`("(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)`, // 2 string or char
  String.raw`(^[ \t]*#[^\n]*)`,                            // 3 preprocessor line
  String.raw`(\b(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)[fFuUlL]*\b)`, // 4 number
  String.raw`([A-Za-z_]\w*)`,                              // 5 identifier
].join('|'), 'gm');

// Returns a <pre><code> element holding source with its tokens marked.
export function highlight(source) {
  const code = h('code', {class: 'lang-cuda'});
  let at = 0;
  for (const m of source.matchAll(TOKEN)) {
    if (m.index > at) code.append(source.slice(at, m.index));
    let cls = null;
    if (m[1]) cls = 'c';
    else if (m[2]) cls = 's';
    else if (m[3]) cls = 'p';
    else if (m[4]) cls = 'n';
    else if (KEYWORDS.has(m[5])) cls = 'k';
    else if (TYPES.has(m[5])) cls = 't';
    else if (BUILTINS.test(m[5])) cls = 'b';
    code.append(cls ? h('span', {class: `tok-${cls}`, text: m[0]}) : m[0]);
    at = m.index + m[0].length;
  }
  if (at < source.length) code.append(source.slice(at));
  return h('pre', {class: 'source'}, code);
}
