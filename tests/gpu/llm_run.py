"""The LLM proposer on a GPU host: a scripted OpenAI-compatible endpoint (tests/llm/
scripted_llm.c) serves real CUDA for a row softmax, in turn a correct kernel, a wrong one
and one that faults; a server with the real evaluator on GPU 0 runs a task with
`proposer: "llm"` and policy best_of_n (independent large steps), and the candidates are
compiled, run, classified and timed like builtin ones. Prints one line per check and a
table, and ends with "N passed, N failed".
Usage: python3 tests/gpu/llm_run.py --build BUILD --scripted-llm PATH --out DIR"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ROWS, COLS = 4096, 4096

TASK = """import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)

def get_inputs():
    return [torch.randn(%d, %d)]

def get_init_inputs():
    return []
""" % (ROWS, COLS)

KERNEL = r"""
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                        int cols) {
  extern __shared__ float red[];
  const float* in = x + (long)blockIdx.x * cols;
  float* out = y + (long)blockIdx.x * cols;
  float m = __int_as_float(0xff800000);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(in[c] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  float inv = SCALE / red[0];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) OUT = expf(in[c] - m) * inv;
}
"""
PLAN = {"buffers": [], "launches": [{"kernel": "softmax_rows", "grid": [ROWS, 1, 1],
                                     "block": [256, 1, 1], "shared_bytes": 1024,
                                     "args": [{"tensor": "input:0"}, {"tensor": "output:0"},
                                              {"i32": COLS}]}]}


def answer(scale, out):
    source = KERNEL.replace("SCALE", scale).replace("OUT", out)
    return "Here is the kernel.\n```cuda\n%s```\n```json\n%s\n```\n" % (
        source, json.dumps(PLAN))


# In turn: correct; wrong (twice the softmax); writes far out of bounds (faults).
REPLIES = [answer("1.f", "out[c]"), answer("2.f", "out[c]"),
           answer("1.f", "y[(long)blockIdx.x * cols * 4096 + (long)cols * 100000000 + c]")]

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else ""),
          flush=True)


def http(url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def start(cmd, out_path, err_path):
    """Starts cmd; returns (process, the URL it prints in its listening line)."""
    out, err = open(out_path, "w"), open(err_path, "w")
    p = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=REPO)
    for _ in range(600):
        time.sleep(0.1)
        text = open(out_path).read()
        if "listening on " in text:
            return p, text.split("listening on ", 1)[1].split()[0]
        if p.poll() is not None:
            break
    raise RuntimeError("%s did not start: %s" % (cmd[0], open(err_path).read()[-500:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--scripted-llm", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp()
    script = os.path.join(work, "script.json")
    with open(script, "w") as f:
        json.dump({"rules": [{"replies": [{"content": c} for c in REPLIES]}]}, f)
    llm, llm_url = start([args.scripted_llm, script, os.path.join(args.out, "llm.jsonl")],
                         os.path.join(args.out, "llm.out"), os.path.join(args.out, "llm.err"))
    key = os.path.join(work, "key")
    with open(key, "w") as f:
        f.write("sk-scripted-0123456789\n")
    server, url = start([os.path.join(args.build, "opforge"), "serve", "--listen",
                         "127.0.0.1:0", "--data", os.path.join(work, "data"), "--gpus", "0",
                         "--evaluator", os.path.join(REPO, "gpu/evaluator/main.py"),
                         "--gpu-lib", os.path.join(args.build, "gpu/libopforge_gpu.so"),
                         "--python", os.environ.get("OPFORGE_PYTHON", "python3"),
                         "--llm-base-url", llm_url, "--llm-model", "scripted",
                         "--llm-key-file", key],
                        os.path.join(args.out, "server.out"),
                        os.path.join(args.out, "server.log"))
    try:
        task = http(url + "/v1/tasks", {"name": "llm_softmax", "reference": TASK,
                                        "proposer": "llm", "policy": "best_of_n",
                                        "budget": {"steps": 3, "stop_at_floor": 0}})
        for _ in range(900):
            time.sleep(1)
            task = http(url + "/v1/tasks/" + task["id"])
            if task["status"] in ("succeeded", "failed", "cancelled"):
                break
        check("the task ended succeeded", task["status"] == "succeeded", task["status"])
        cands = http(url + "/v1/tasks/%s/candidates?limit=50" % task["id"])["items"]
        print("\n%-5s %-10s %-8s %-40s %10s" % ("STEP", "KIND", "CORRECT", "CLASS", "TIME_MS"))
        seen = []
        for c in cands:
            r = c.get("result") or {}
            fail = r.get("failure") or {}
            t = (r.get("time") or {}).get("median_ms")
            seen.append((c["step_kind"], bool(r.get("correct")), fail.get("class")))
            print("%-5s %-10s %-8s %-40s %10s" % (c["step"], c["step_kind"],
                                                 "yes" if r.get("correct") else "no",
                                                 fail.get("class") or "-",
                                                 "%.4f" % t if t else "-"))
        steps = [s for s in seen if s[0] != "reference"]
        check("three LLM steps were evaluated", len(steps) == 3, str(steps))
        check("the first kernel is correct and timed", len(steps) > 0 and steps[0][1])
        check("the second is a correctness failure",
              len(steps) > 1 and (steps[1][2] or "").startswith("correctness/"), str(steps[1:2]))
        check("the third faults (a CUDA error, the evaluator restarted)",
              len(steps) > 2 and (steps[2][2] or "").startswith(("cuda/", "crash/", "launch/")),
              str(steps[2:3]))
        p = task["progress"]
        check("tokens were counted", p.get("llm_prompt_tokens", 0) > 0,
              "prompt %s completion %s" % (p.get("llm_prompt_tokens"),
                                           p.get("llm_completion_tokens")))
        print("\nbest %.4f ms, %.2fx eager (eager %.4f ms)" % (
            p.get("best_ms") or 0, p.get("best_speedup") or 0,
            (task.get("baselines") or {}).get("eager_ms") or 0))
    finally:
        server.terminate()
        server.wait(30)
        llm.terminate()
        llm.wait(10)
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
