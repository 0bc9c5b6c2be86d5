"""moto's server, with parts of EC2's documented behaviour that orca's tests rely on and moto
lacks: AttachVolume's refusals (see _attaching_as_ebs_does), idempotency by ClientToken for
RunInstances and CreateFleet
(https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html), and, when IAM
enforcement is on (tests/src/iam.rs), EC2's answer to a call the caller's policy does not allow
(see UnauthorizedOperation below), every refusal logged, and signatures checked against the
bytes that were signed (with ORCA_MOTO_CHECKS_SIGNATURES=1, see _keeping_the_signed_body).
With ORCA_MOTO_RUNS_COMMANDS=1 (the harness sets it), Systems Manager's Run Command behaves as
an SSM agent on each running instance would (see _running_as_an_agent_would). With
ORCA_MOTO_SPOT_PRICES=FILE (the harness sets it), DescribeSpotPriceHistory answers the price
history a test wrote to FILE for the pools it names (see _answering_the_set_spot_prices);
moto answers one constant price for every pool. And a resource's tags are read by its id, not
by a scan of every tag (see _tags_of), so moto stays as fast with the thousands of instances a
whole test run leaves as it is fresh.

EC2 answers a request repeated with the same ClientToken with the first request's result and
launches nothing more; the same token with other parameters is refused with
IdempotentParameterMismatch. orca derives its tokens from the pod's UID, so a launch repeated by
a restarted or a second replica (whose first attempt the dying one sent) is never a second
instance. moto 5 keeps the token but launches again; this wrapper gives it EC2's answer.

Usage: python moto-server-with-client-tokens.py [moto_server arguments]
"""

import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import uuid
from xml.sax.saxutils import escape

from moto.core.authorization import ActionAuthenticatorMixin
from moto.core.responses import BaseResponse
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.responses.elastic_block_store import ElasticBlockStore
from moto.ec2.responses.fleets import Fleets
from moto.ec2.responses.instances import InstanceResponse
from moto.ec2.responses.spot_instances import SpotInstances
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix
from moto.iam.access_control import IAMRequest
from moto.server import main
from moto.ssm.exceptions import SSMException
from moto.ssm.models import Command, SimpleSystemManagerBackend
from werkzeug.exceptions import HTTPException

# Query parameters that are not the request's own (signing, protocol).
NOT_PARAMETERS = {"ClientToken", "Action", "Version", "AWSAccessKeyId"}

_lock = threading.Lock()
# (account, region, action, token) -> (parameters, result)
_answers = {}


def _idempotent(action):
    def wrap(method):
        def launch(self):
            token = (self.querystring.get("ClientToken") or [None])[0]
            if not token:
                return method(self)
            parameters = tuple(
                (key, tuple(values))
                for key, values in sorted(self.querystring.items())
                if key not in NOT_PARAMETERS
            )
            key = (self.current_account, self.region, action, token)
            # One request per token at a time, as EC2 serialises them.
            with _lock:
                known = _answers.get(key)
                if known is not None:
                    if known[0] != parameters:
                        raise EC2ClientError(
                            "IdempotentParameterMismatch",
                            f"Client token {token} was used with other parameters.",
                        )
                    return known[1]
                result = method(self)
                _answers[key] = (parameters, result)
                return result

        return launch

    return wrap


InstanceResponse.run_instances = _idempotent("RunInstances")(InstanceResponse.run_instances)
Fleets.create_fleet = _idempotent("CreateFleet")(Fleets.create_fleet)


def _attaching_as_ebs_does(attach):
    """AttachVolume as EC2 documents it
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_AttachVolume.html and its error
    codes): a volume attached to an instance is refused (VolumeInUse) until it is detached; the
    instance must be running or stopped (IncorrectState) and in the volume's zone
    (InvalidVolume.ZoneMismatch); a device name in use on the instance is refused
    (InvalidParameterValue). moto 5 attaches in every case, a second instance included. Only
    the API call is checked: moto's own root volumes attach as before."""

    def checked(self):
        volume_id = self._get_param("VolumeId")
        instance_id = self._get_param("InstanceId")
        device = self._get_param("Device")
        volume = self.ec2_backend.get_volume(volume_id)
        instance = self.ec2_backend.get_instance(instance_id)
        if volume.attachment is not None:
            raise EC2ClientError(
                "VolumeInUse", f"{volume_id} is already attached to an instance"
            )
        if instance._state.name not in ("running", "stopped"):
            raise EC2ClientError(
                "IncorrectState", f"Instance '{instance_id}' is not 'running'."
            )
        zone = volume.zone.name if volume.zone else None
        if zone != instance._placement.zone:
            raise EC2ClientError(
                "InvalidVolume.ZoneMismatch",
                f"The volume '{volume_id}' is not in the same availability zone as instance "
                f"'{instance_id}'",
            )
        if device in instance.block_device_mapping:
            raise EC2ClientError(
                "InvalidParameterValue",
                f"Invalid value '{device}' for unixDevice. Attachment point {device} is "
                "already in use",
            )
        return attach(self)

    return checked


ElasticBlockStore.attach_volume = _attaching_as_ebs_does(ElasticBlockStore.attach_volume)


def _tags_of(self):
    """One resource's tags, as moto's TaggedEC2Resource.get_tags returns them (the same
    records, in the same order), read from the backend's map by the resource's id.

    moto finds them by a DescribeTags over every tag of every resource, matching each resource
    id against this one's as a pattern, so a DescribeInstances, which reads each instance's tags
    for its filters and its answer, costs the number of instances times the number of tags. moto
    keeps terminated instances for ever, and a test suite sharing one moto launches thousands:
    measured with 3,000 terminated instances, one DescribeInstances with a tag filter took 4.9 s
    (6 ms on a fresh moto), enough to fail later tests' deadlines. Ids hold no pattern
    characters, so the direct read answers exactly what the scan did."""
    resource_id = getattr(self, "id", None)
    if not resource_id:
        return []
    resource_type = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
    return [
        {"resource_id": resource_id, "key": key, "value": value, "resource_type": resource_type}
        for key, value in (self.ec2_backend.tags.get(resource_id) or {}).items()
    ]


TaggedEC2Resource.get_tags = _tags_of


def _timestamp(value):
    """A time as moto parsed it from the request, or as FILE writes it (ISO 8601:
    `2026-11-27T10:00:00Z`, with or without fractions)."""
    if isinstance(value, datetime.datetime):
        moment = value
    else:
        moment = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def _answering_the_set_spot_prices(describe):
    """DescribeSpotPriceHistory as EC2 documents it
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html)
    for the pools a test set: FILE (ORCA_MOTO_SPOT_PRICES) holds a JSON list of price changes,
    each {"InstanceType", "AvailabilityZone", "SpotPrice", "Timestamp"} and optionally
    "ProductDescription" (default "Linux/UNIX"), written whole by tests/src/spot_prices.rs. For a
    pool with changes in FILE, the answer is its changes from StartTime to EndTime (either
    absent: unbounded) and, as EC2 does, the last change before StartTime, the price in effect
    then; newest first, filtered by InstanceType.N, ProductDescription.N, AvailabilityZone and
    the instance-type, availability-zone and product-description filters. Every other pool is
    answered as moto answers it (one constant price). No paging: the whole answer is one page."""

    def described(self):
        try:
            with open(SPOT_PRICES_FILE) as f:
                changes = json.load(f)
        except FileNotFoundError:
            changes = []
        if not changes:
            return describe(self)
        types = set(self._get_param("InstanceTypes", []))
        products = set(self._get_param("ProductDescriptions", []))
        zone = self._get_param("AvailabilityZone")
        filters = self._filters_from_querystring()
        types |= set(filters.get("instance-type", []))
        products |= set(filters.get("product-description", []))
        zones = set(filters.get("availability-zone", [])) | ({zone} if zone else set())
        start = self._get_param("StartTime")
        end = self._get_param("EndTime")
        start = _timestamp(start) if start else None
        end = _timestamp(end) if end else None

        pools = {}
        for change in changes:
            change = dict(change)
            change.setdefault("ProductDescription", "Linux/UNIX")
            key = (change["InstanceType"], change["AvailabilityZone"], change["ProductDescription"])
            pools.setdefault(key, []).append(change)
        history = []
        for (kind, pool_zone, product), pool in pools.items():
            if (types and kind not in types) or (zones and pool_zone not in zones):
                continue
            if products and product not in products:
                continue
            pool.sort(key=lambda c: _timestamp(c["Timestamp"]))
            before = [c for c in pool if start and _timestamp(c["Timestamp"]) <= start]
            within = [
                c
                for c in pool
                if (not start or _timestamp(c["Timestamp"]) > start)
                and (not end or _timestamp(c["Timestamp"]) <= end)
            ]
            history.extend(before[-1:] + within)
        set_pools = {(kind, pool_zone) for (kind, pool_zone, _) in pools}
        result = describe(self)
        for entry in result.result.get("SpotPriceHistory", []):
            if (entry["InstanceType"], entry["AvailabilityZone"]) in set_pools:
                continue
            if products and "Linux/UNIX (Amazon VPC)" not in products:
                # moto's constant is for "Linux/UNIX (Amazon VPC)": answered under the product
                # asked for, as EC2 would have a price for it.
                entry = dict(entry, ProductDescription=sorted(products)[0])
            history.append(entry)
        history.sort(key=lambda c: _timestamp(c["Timestamp"]), reverse=True)
        result.result["SpotPriceHistory"] = history
        return result

    return described


SPOT_PRICES_FILE = os.environ.get("ORCA_MOTO_SPOT_PRICES")
if SPOT_PRICES_FILE:
    SpotInstances.describe_spot_price_history = _answering_the_set_spot_prices(
        SpotInstances.describe_spot_price_history
    )


# What SSM returns of a command's output at most (GetCommandInvocation's documentation).
STDOUT_LIMIT = 24000
STDERR_LIMIT = 8000
# Per (command id, instance id): how many times GetCommandInvocation asked.
_polls = {}
# A directory per instance: the instance's "filesystem" as commands see it.
_instances_root = tempfile.mkdtemp(prefix="orca-moto-instances-")
# `docker exec [-i] [-t] CONTAINER COMMAND...` on a stand-in instance runs COMMAND in the
# instance's directory, with the container's name in ORCA_EXEC_CONTAINER; a container name
# that is not orca's (`orca-…`) fails as Docker does.
_DOCKER = r"""#!/bin/bash
[ "$1" = exec ] || { echo "docker stand-in: only exec" >&2; exit 1; }
shift
while [ "${1#-}" != "$1" ]; do shift; done
container=$1
shift
case $container in
  orca-*) ;;
  *) echo "Error response from daemon: No such container: $container" >&2; exit 1 ;;
esac
ORCA_EXEC_CONTAINER=${container#orca-} exec "$@"
"""


def _running_as_an_agent_would(send, get):
    """SendCommand and GetCommandInvocation of AWS-RunShellScript as the SSM agent on a running
    instance would answer them
    (https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_GetCommandInvocation.html):
    an instance that is not running is not a managed instance (InvalidInstanceId); the script runs
    (with bash, `docker` a stand-in above), and its invocation is first unknown
    (InvocationDoesNotExist), then InProgress, then Success or Failed with the script's exit code
    as ResponseCode and its output cut at SSM's limits. moto answers every command Success with
    no output."""

    def send_command(self, **kwargs):
        ec2 = self._ec2_backend_for_commands()
        for instance_id in kwargs.get("instance_ids") or []:
            try:
                state = ec2.get_instance(instance_id)._state.name
            except Exception:
                state = None
            if state != "running":
                raise SSMException(
                    "InvalidInstanceId",
                    f"Instances [[{instance_id}]] not in a valid state for account "
                    f"{self.account_id}",
                )
        command = send(self, **kwargs)
        if command.document_name != "AWS-RunShellScript":
            return command
        script = "\n".join(command.parameters.get("commands", []))
        timeout = int((command.parameters.get("executionTimeout") or ["3600"])[0])
        for invocation in command.invocations:
            _run(invocation, script, min(timeout, 120))
        return command

    def get_command_invocation(self, command_id, instance_id, plugin_name):
        invocation = get(self, command_id, instance_id, plugin_name)
        with _lock:
            polls = _polls.get((command_id, instance_id), 0) + 1
            _polls[(command_id, instance_id)] = polls
        if polls == 1:
            raise SSMException(
                "InvocationDoesNotExist",
                "An error occurred (InvocationDoesNotExist) when calling the "
                "GetCommandInvocation operation",
            )
        if polls == 2:
            return dict(
                invocation,
                Status="InProgress",
                StatusDetails="InProgress",
                ResponseCode=-1,
                StandardOutputContent="",
                StandardErrorContent="",
            )
        return invocation

    return send_command, get_command_invocation


def _run(invocation, script, timeout):
    home = os.path.join(_instances_root, invocation["InstanceId"])
    bin_dir = os.path.join(home, ".bin")
    os.makedirs(bin_dir, exist_ok=True)
    docker = os.path.join(bin_dir, "docker")
    with open(docker, "w") as f:
        f.write(_DOCKER)
    os.chmod(docker, 0o755)
    env = dict(os.environ, PATH=bin_dir + ":" + os.environ.get("PATH", ""), HOME=home)
    try:
        done = subprocess.run(
            ["bash", "-c", script], cwd=home, env=env, capture_output=True, timeout=timeout
        )
        code, out, err = done.returncode, done.stdout, done.stderr
        status = "Success" if code == 0 else "Failed"
    except subprocess.TimeoutExpired as expired:
        code, out, err, status = -1, expired.stdout or b"", expired.stderr or b"", "TimedOut"
    invocation.update(
        Status=status,
        StatusDetails="ExecutionTimedOut" if status == "TimedOut" else status,
        ResponseCode=code,
        StandardOutputContent=out.decode("utf-8", "replace")[:STDOUT_LIMIT],
        StandardErrorContent=err.decode("utf-8", "replace")[:STDERR_LIMIT],
    )


def _ec2_backend_for_commands(self):
    from moto.ec2 import ec2_backends

    return ec2_backends[self.account_id][self.region_name]


def _instances_targeted(targeted):
    """SendCommand's instances by its Targets, none when it has no Targets.

    SendCommand sends to the InstanceIds it names and to the instances its Targets select
    (https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_SendCommand.html).
    moto selects the instances of an empty Targets with no filter, so a command naming one
    instance went to every instance moto ever launched, terminated ones included: an invocation
    each, and with ORCA_MOTO_RUNS_COMMANDS a script run each (11.5 s for one `kubectl exec`
    with 3,000 instances, past orca's 25 s deadline a little later in a test run)."""

    def instances(self):
        if not self.targets:
            return []
        return targeted(self)

    return instances


Command._get_instance_ids_from_targets = _instances_targeted(Command._get_instance_ids_from_targets)


if os.environ.get("ORCA_MOTO_RUNS_COMMANDS") == "1":
    SimpleSystemManagerBackend._ec2_backend_for_commands = _ec2_backend_for_commands
    (
        SimpleSystemManagerBackend.send_command,
        SimpleSystemManagerBackend.get_command_invocation,
    ) = _running_as_an_agent_would(
        SimpleSystemManagerBackend.send_command,
        SimpleSystemManagerBackend.get_command_invocation,
    )


class UnauthorizedOperation(HTTPException):
    """EC2's refusal of a call the caller's IAM policy does not allow.

    EC2's error code reference
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html) lists
    UnauthorizedOperation, "You are not authorized to perform this operation", among the client
    errors, answered with HTTP 403; the message names the caller and the action, e.g. "User:
    arn:aws:iam::123456789012:user/orca is not authorized to perform: ec2:DescribeSubnets because
    no identity-based policy allows the ec2:DescribeSubnets action". moto 5 answers every service
    the way IAM does instead (AccessDenied, in IAM's ErrorResponse document), a code no EC2 client
    sees from EC2; orca classifies UnauthorizedOperation (host/src/provider/aws/classify.rs).
    The body is EC2's error document (Response/Errors/Error, RequestID).
    """

    code = 403
    error_type = "UnauthorizedOperation"

    def __init__(self, user_arn, action):
        super().__init__()
        self.message = (
            f"You are not authorized to perform this operation. User: {user_arn} is not "
            f"authorized to perform: {action} because no identity-based policy allows the "
            f"{action} action"
        )
        self.description = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            "<Response><Errors><Error><Code>UnauthorizedOperation</Code>"
            f"<Message>{escape(self.message)}</Message></Error></Errors>"
            f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
        )


def _ec2_unauthorized(raise_access_denied):
    def refuse(self):
        if self._service == "ec2":
            raise UnauthorizedOperation(self._access_key.arn, self._action)
        raise_access_denied(self)

    return refuse


def _logged(authorize):
    """Every refused request, on stderr as one line starting with "moto-iam: refused", so a
    test can tell that nothing was refused without trusting the client's own account of it;
    and the refusal in the protocol the request spoke. Only an IAM-enforcing moto refuses
    anything; the harness's shared moto never does."""

    def check(self, iam_request_cls, resource="*"):
        try:
            authorize(self, iam_request_cls, resource)
        except HTTPException as refused:
            code = getattr(refused, "error_type", type(refused).__name__)
            message = getattr(refused, "message", "")
            print(
                f"moto-iam: refused {self._get_action()} on {resource}: {code}: {message}",
                file=sys.stderr,
                flush=True,
            )
            # A JSON-protocol service (SQS since botocore 1.31) is answered in JSON, as AWS does;
            # moto would send IAM's XML, which such a client cannot read as an error code.
            if self.headers.get("X-Amz-Target") and hasattr(refused, "to_json"):
                raise refused.to_json() from None
            raise

    return check


def _keeping_the_signed_body(setup_class):
    """moto checks a request's SigV4 signature against the body it re-encodes from the parsed
    form when, as in server mode, the form parser has consumed the raw body: Python's encoding
    (a space as "+") is not every SDK's (the Rust SDK's "%20"), so a request with a space in a
    parameter (orca's CreateLaunchTemplate) fails AuthFailure. Reading the body into werkzeug's
    cache first keeps the bytes that were signed: the form is then parsed from the cache, and
    moto's signature check (IAMRequestBase._create_aws_request) uses the raw bytes."""

    def setup(self, request, *args, **kwargs):
        if "form" not in request.__dict__ and request.content_encoding != "gzip":
            request.get_data(cache=True)
        return setup_class(self, request, *args, **kwargs)

    return setup


IAMRequest._raise_access_denied = _ec2_unauthorized(IAMRequest._raise_access_denied)
ActionAuthenticatorMixin._authenticate_and_authorize_action = _logged(
    ActionAuthenticatorMixin._authenticate_and_authorize_action
)
# Only where signatures are checked (tests/src/iam.rs sets it): the harness's shared moto
# answers every request as it always has.
if os.environ.get("ORCA_MOTO_CHECKS_SIGNATURES") == "1":
    BaseResponse.setup_class = _keeping_the_signed_body(BaseResponse.setup_class)

if __name__ == "__main__":
    main(sys.argv[1:])
