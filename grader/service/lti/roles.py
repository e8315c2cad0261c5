"""LIS roles of a launch, mapped onto this tool's two: student and instructor.

Roles in the course (context roles: `.../lis/v2/membership#Learner`, or a sub-role such as
`.../membership/Instructor#TeachingAssistant`, or the short form `Learner`) decide. Only when
a launch carries no context role do institution and system roles count, so that a member of
staff who takes a course as a learner is a student in it.
"""

from __future__ import annotations

from typing import Literal

LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
TEACHING = {"Instructor", "ContentDeveloper", "Administrator", "Manager", "TeachingAssistant"}
LEARNING = {"Learner"}
STAFF = {"Instructor", "Faculty", "Administrator", "SysAdmin"}  # institution, system
STUDENTS = {"Student", "Learner"}

Role = Literal["student", "instructor"]


def role_of(roles: list) -> Role | None:
    context, other = _split(roles)
    if context:
        return _decide(context, TEACHING, LEARNING)
    return _decide(other, STAFF, STUDENTS)


def _split(roles: list) -> tuple[set[str], set[str]]:
    """Role names in the course, and institution or system role names."""
    context: set[str] = set()
    other: set[str] = set()
    for role in roles:
        if not isinstance(role, str):
            continue
        if role.startswith(LIS + "membership"):
            context.add(_name(role))
            if "/Instructor#" in role or "/Administrator#" in role:
                context.add("Instructor")  # a sub-role of a teaching role
        elif role.startswith(LIS):
            other.add(_name(role))
        elif "/" not in role and "#" not in role:
            context.add(role)  # the short form of a context role
    return context, other


def _name(role: str) -> str:
    return role.rsplit("#", 1)[-1] if "#" in role else role.rsplit("/", 1)[-1]


def _decide(names: set[str], teaching: set[str], learning: set[str]) -> Role | None:
    if names & teaching:
        return "instructor"
    if names & learning:
        return "student"
    return None
