"""Rank FAIL_RANK raises RuntimeError(MESSAGE) inside a function wrapped by torch's
@record, which writes the exception to TORCHELASTIC_ERROR_FILE; other ranks wait.
    raise_with_record.py FAIL_RANK MESSAGE"""
import os
import sys

from wait_forever import wait_forever

fail_rank, message = int(sys.argv[1]), sys.argv[2]
rank = int(os.environ["RANK"])
if rank != fail_rank:
    wait_forever()

from torch.distributed.elastic.multiprocessing.errors import record  # noqa: E402


@record
def main():
    raise RuntimeError(message)


main()
