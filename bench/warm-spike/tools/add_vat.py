# The no-dependency tool of the spike: examples/tools/add_vat.json's code.
import json, sys
from decimal import Decimal, ROUND_HALF_UP

a = json.load(sys.stdin)
net = Decimal(str(a["net"]))
vat = (net * Decimal("0.20")).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
gross = (net + vat).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
print(json.dumps({"net": str(a["net"]), "rate": "20", "vat": str(vat), "gross": str(gross)}))
