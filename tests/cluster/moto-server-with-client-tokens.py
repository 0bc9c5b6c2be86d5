"""moto's server, with one part of EC2's documented behaviour that orca's tests rely on and moto
lacks: idempotency by ClientToken for RunInstances and CreateFleet
(https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html).

EC2 answers a request repeated with the same ClientToken with the first request's result and
launches nothing more; the same token with other parameters is refused with
IdempotentParameterMismatch. orca derives its tokens from the pod's UID, so a launch repeated by
a restarted or a second replica (whose first attempt the dying one sent) is never a second
instance. moto 5 keeps the token but launches again; this wrapper gives it EC2's answer.

Usage: python moto-server-with-client-tokens.py [moto_server arguments]
"""

import sys
import threading

from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses.fleets import Fleets
from moto.ec2.responses.instances import InstanceResponse
from moto.server import main

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

if __name__ == "__main__":
    main(sys.argv[1:])
