# The script tool of workload 4 (one dependency: python-dateutil). scripts/bench stores it in
# OmniForge as `bench_dateutil` and also runs it bare: <env>/bin/python -I dateutil_tool.py.
import json
import sys

from dateutil import parser
from dateutil.relativedelta import relativedelta

args = json.load(sys.stdin)
d = parser.isoparse(args["date"])
print(json.dumps({"date": d.isoformat(), "weekday": d.strftime("%A"),
                  "next_month": (d + relativedelta(months=1)).date().isoformat()}))
