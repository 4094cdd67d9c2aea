"""The Invoke API's FunctionName and Qualifier, read as Lambda reads them.

Why its own module: a stand-in that looks a name up literally is kinder than AWS where
it matters (an alias that does not exist is run, an ARN of another account is run) and
harsher where it does not (`name:$LATEST` refused). Lambda takes, per the Invoke API's
reference: a name (`my-function`), a name with a qualifier (`my-function:v1`), a
partial ARN (`123456789012:function:my-function`) or a full ARN
(`arn:aws:lambda:us-east-1:123456789012:function:my-function`), each with an optional
`:qualifier`, and a `Qualifier` query parameter. As AWS answers:
- a FunctionName or Qualifier outside the model's constraints (its pattern, a length past
  256, a name alone past 64 characters): 400 ValidationException, "1 validation error
  detected: Value '...' at 'functionName' failed to satisfy constraint: ...";
- both qualifiers given and different: 400 InvalidParameterValueException, "The derived
  qualifier from the function name does not match the specified qualifier.";
- another account's function: 403 AccessDeniedException (no resource-based policy of
  that account lets the stack's caller invoke it);
- a function, region or qualifier the stack does not have: 404
  ResourceNotFoundException, "Function not found: <the qualified ARN>".
The stack has one version of each function, `$LATEST`, and the aliases its template
declares (AutoPublishAlias); a published version's number is not found here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ACCOUNT = "123456789012"
# botocore's model of the Invoke API: FunctionName (NamespacedFunctionName) and Qualifier
NAME_PATTERN = (
    r"(arn:(aws[a-zA-Z-]*)?:lambda:)?((eusc-)?[a-z]{2}((-gov)|(-iso([a-z]?)))?-[a-z]+-\d{1}:)?"
    r"(\d{12}:)?(function:)?([a-zA-Z0-9-_\.]+)(:(\$LATEST(\.PUBLISHED)?|[a-zA-Z0-9-_]+))?"
)
NAME_MAX = 256  # the whole FunctionName (an ARN's length)
NAME_ONLY_MAX = 64  # "If you specify only the function name, it is limited to 64 characters"
QUALIFIER_PATTERN = r"(|[a-zA-Z0-9$_-]+)"
QUALIFIER_MAX = 128
REGION = "us-east-1"
LATEST = "$LATEST"


class NameRefused(Exception):
    """The FunctionName/Qualifier pair is refused: Lambda's status, code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class FunctionName:
    name: str
    qualifier: str | None = None
    account: str = ACCOUNT
    region: str = REGION

    def arn(self) -> str:
        tail = f":{self.qualifier}" if self.qualifier else ""
        return f"arn:aws:lambda:{self.region}:{self.account}:function:{self.name}{tail}"


def _invalid(value: str, member: str, constraint: str) -> NameRefused:
    return NameRefused(
        400,
        "ValidationException",
        f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy "
        f"constraint: {constraint}",
    )


def _check(value: str, member: str, longest: int, pattern: str, length: int = -1) -> None:
    """`value` within `longest` characters (`length`: the part measured, else the whole)
    and matching `pattern`, else NameRefused in Lambda's words for `member`."""
    if (len(value) if length < 0 else length) > longest:
        constraint = f"Member must have length less than or equal to {longest}"
        raise _invalid(value, member, constraint)
    if re.fullmatch(pattern, value) is None:
        constraint = f"Member must satisfy regular expression pattern: {pattern}"
        raise _invalid(value, member, constraint)


def validate(function_name: str, qualifier: str | None = None) -> None:
    """NameRefused (400 ValidationException, Lambda's wording for a value outside its
    model) for a FunctionName or Qualifier outside the Invoke API's constraints, before any
    lookup: a stand-in answering 404 for them hid a name that can never be deployed."""
    _check(function_name, "functionName", NAME_MAX, NAME_PATTERN)
    if ":function:" not in f":{function_name}":  # a name alone (with its :qualifier)
        name_only = len(function_name.split(":")[0])
        _check(function_name, "functionName", NAME_ONLY_MAX, NAME_PATTERN, name_only)
    if qualifier is not None:
        _check(qualifier, "qualifier", QUALIFIER_MAX, QUALIFIER_PATTERN)


def parse(function_name: str, qualifier: str | None = None) -> FunctionName:
    """FunctionName (any of its forms) and the Qualifier parameter, as Lambda reads them;
    first checked against the API's constraints (validate)."""
    validate(function_name, qualifier)
    parts = function_name.split(":")
    account, region = ACCOUNT, REGION
    if parts[0] == "arn" and len(parts) >= 7 and parts[2] == "lambda" and parts[5] == "function":
        region, account, rest = parts[3], parts[4], parts[6:]
    elif "function" in parts and parts.index("function") in (1, 2):  # [region:]account:...
        at = parts.index("function")
        account, region = parts[at - 1], parts[0] if at == 2 else REGION
        rest = parts[at + 1 :]
    else:
        rest = parts
    if not rest or len(rest) > 2 or not rest[0]:
        raise NameRefused(404, "ResourceNotFoundException", f"Function not found: {function_name}")
    derived = rest[1] if len(rest) == 2 else None
    if derived and qualifier and derived != qualifier:
        raise NameRefused(
            400,
            "InvalidParameterValueException",
            "The derived qualifier from the function name does not match the specified qualifier.",
        )
    return FunctionName(rest[0], derived or qualifier or None, account, region)


def check(named: FunctionName, known: bool, aliases: tuple[str, ...]) -> None:
    """NameRefused unless `named` is a function the stack has (`known`), in its account and
    region, unqualified, `$LATEST` or one of its `aliases`."""
    if named.account != ACCOUNT:
        raise NameRefused(
            403,
            "AccessDeniedException",
            f"User: arn:aws:iam::{ACCOUNT}:user/pgkick-dev is not authorized to perform: "
            f"lambda:InvokeFunction on resource: {named.arn()} because no resource-based "
            "policy allows the lambda:InvokeFunction action",
        )
    if not known or named.region != REGION or named.qualifier not in (None, LATEST, *aliases):
        raise NameRefused(404, "ResourceNotFoundException", f"Function not found: {named.arn()}")
