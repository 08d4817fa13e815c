-- wrk script: POST /v1/tasks with a minimal valid submission (docs/bench-results.md).
-- Usage: wrk -t2 -c32 -d10s --latency -s tests/api/post.lua http://127.0.0.1:PORT
wrk.method = "POST"
wrk.path = "/v1/tasks"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name":"bench","reference":"import torch\\nimport torch.nn as nn\\n\\n' ..
  'class Model(nn.Module):\\n    def forward(self, x):\\n        return torch.relu(x)\\n\\n' ..
  'def get_inputs():\\n    return [torch.randn(16, 16)]\\n\\n' ..
  'def get_init_inputs():\\n    return []\\n"}'
