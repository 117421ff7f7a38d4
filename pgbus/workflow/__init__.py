"""Durable multi-step workflows. The rules live in SQL (pgbus.workflow_*); this package
declares workflows, runs their step bodies and wraps the outside verbs."""

from pgbus.workflow.base import StepVerb, Workflow, workflow_class
from pgbus.workflow.definition import (
    ExceptionPolicy,
    FanOut,
    Signal,
    SignalMatcher,
    fan_out,
    on_exception,
    removed_step,
    step,
)
from pgbus.workflow.errors import (
    AlreadyRunning,
    FanOutBatchGone,
    FanOutFailed,
    InvalidPolicyDecision,
    InvalidSignalPayload,
    NoOngoingRun,
    PayloadTooLarge,
    StepBeginFailed,
    StepNotDefined,
    SubjectNotRegistered,
    UnknownWorkflow,
    WaitingStepsUnmigrated,
    WaitTimedOut,
    WorkflowNotRegistered,
    WorkflowRefused,
)
from pgbus.workflow.runner import BatchFinishedJob, StepJob, StepLogFilter
from pgbus.workflow.runs import Event, SignalDelivery, WorkflowRun
from pgbus.workflow.subjects import register_subject

__all__ = [
    "AlreadyRunning",
    "BatchFinishedJob",
    "Event",
    "ExceptionPolicy",
    "FanOut",
    "FanOutBatchGone",
    "FanOutFailed",
    "InvalidPolicyDecision",
    "InvalidSignalPayload",
    "NoOngoingRun",
    "PayloadTooLarge",
    "Signal",
    "SignalDelivery",
    "SignalMatcher",
    "StepBeginFailed",
    "StepJob",
    "StepLogFilter",
    "StepNotDefined",
    "StepVerb",
    "SubjectNotRegistered",
    "UnknownWorkflow",
    "WaitTimedOut",
    "WaitingStepsUnmigrated",
    "Workflow",
    "WorkflowNotRegistered",
    "WorkflowRefused",
    "WorkflowRun",
    "fan_out",
    "on_exception",
    "register_subject",
    "removed_step",
    "step",
    "workflow_class",
]
