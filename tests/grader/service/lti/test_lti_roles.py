"""Roles of a launch, as LMSs send them, mapped to student and instructor."""

from __future__ import annotations

import pytest

from grader.service.lti import role_of

LIS = "http://purl.imsglobal.org/vocab/lis/v2/"


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        ([LIS + "membership#Learner"], "student"),
        ([LIS + "membership#Instructor"], "instructor"),
        ([LIS + "membership/Instructor#TeachingAssistant"], "instructor"),
        ([LIS + "membership#ContentDeveloper"], "instructor"),
        (["Learner"], "student"),  # the short form of a course role
        (["Instructor"], "instructor"),
        # a member of staff taking a course as a learner is a student in it
        ([LIS + "institution/person#Instructor", LIS + "membership#Learner"], "student"),
        ([LIS + "institution/person#Student"], "student"),  # no course role: institution's
        ([LIS + "system/person#Administrator"], "instructor"),
        ([LIS + "membership#Mentor"], None),
        ([], None),
        ([42, None], None),
    ],
)
def test_course_roles_decide_and_institution_roles_fill_in(roles, expected):
    assert role_of(roles) == expected
