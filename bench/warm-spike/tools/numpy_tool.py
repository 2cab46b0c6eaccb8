# The numpy tool of the spike: examples/tools/describe_numbers.json's code (numpy, a small computation).
import json, sys
import numpy as np

xs = np.asarray(json.load(sys.stdin)["values"], dtype=float)
print(json.dumps({"count": int(xs.size), "mean": float(xs.mean()), "std": float(xs.std()),
                  "p50": float(np.percentile(xs, 50)), "p95": float(np.percentile(xs, 95))}))
