"""Durable multi-step workflows. The rules live in SQL (pgbus.workflow_*); this package
declares workflows, runs their step bodies and wraps the outside verbs."""

from pgbus.workflow.base import StepVerb, Workflow, workflow_class
from pgbus.workflow.definition import ExceptionPolicy, on_exception, removed_step, step
from pgbus.workflow.errors import (
    AlreadyRunning,
    PayloadTooLarge,
    StepNotDefined,
    SubjectNotRegistered,
    UnknownWorkflow,
    WorkflowRefused,
)
from pgbus.workflow.runner import StepJob, StepLogFilter
from pgbus.workflow.runs import Event, WorkflowRun
from pgbus.workflow.subjects import register_subject

__all__ = [
    "AlreadyRunning",
    "Event",
    "ExceptionPolicy",
    "PayloadTooLarge",
    "StepJob",
    "StepLogFilter",
    "StepNotDefined",
    "StepVerb",
    "SubjectNotRegistered",
    "UnknownWorkflow",
    "Workflow",
    "WorkflowRefused",
    "WorkflowRun",
    "on_exception",
    "register_subject",
    "removed_step",
    "step",
    "workflow_class",
]
