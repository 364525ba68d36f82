#!/usr/bin/env python3
"""Prints the golden records of tests/train/tensorboard_events_test.cc, made by TensorBoard's
own protocol buffer classes and record writer (pip install tensorboard), so the test compares
lansbert's hand-written encoding with the reference's bytes. Run it again after changing the
cases there: python3 tests/python/tensorboard_golden.py"""
import io

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter


def record(event):
    buf = io.BytesIO()
    RecordWriter(buf).write(event.SerializeToString())
    return buf.getvalue().hex()


def scalars(wall_time, step, values):
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values])
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary)


cases = {
    "file_version": event_pb2.Event(wall_time=1.5, file_version="brain.Event:2"),
    "session_start": event_pb2.Event(wall_time=2.25, step=7,
                                     session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START)),
    "scalars": scalars(1700000000.5, 42, [("train/loss", 7.25), ("eval/mlm_accuracy", -0.5)]),
    "scalars_large_step": scalars(3.0, 300000, [("speed/tokens_per_s", 123456.789)]),
}
for name, event in cases.items():
    print(f'{name}: "{record(event)}"')
