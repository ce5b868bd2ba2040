"""Entry point of a worker subprocess: `python -m harness.worker --target auto|sm_90a`."""
import argparse

from harness.execute import worker_main

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="auto")
    worker_main(p.parse_args().target)
