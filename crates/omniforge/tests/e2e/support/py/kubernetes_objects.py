#!/usr/bin/env python3
"""Prints the objects of a multi-document YAML file (what `kubectl kustomize` rendered) as one
JSON array, for crates/omniforge/tests/e2e/kubernetes.rs (PyYAML from .deps/py-k8s).

    python kubernetes_objects.py RENDERED.yaml
"""
import json
import sys

import yaml

with open(sys.argv[1]) as f:
    print(json.dumps([doc for doc in yaml.safe_load_all(f) if doc is not None]))
