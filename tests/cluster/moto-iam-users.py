"""Makes IAM users in a moto server whose IAM enforcement is still off, then turns it on.

Reads a JSON object from stdin, {"endpoint": URL, "region": REGION, "users": {NAME: POLICY}},
where each POLICY is an IAM policy document. Each user gets that document as its one inline
policy and an access key. Then it POSTs 0 to /moto-api/reset-auth: moto's
INITIAL_NO_AUTH_ACTION_COUNT, the number of requests it answers before it starts checking
signatures and policies (settings.INITIAL_NO_AUTH_ACTION_COUNT, read by
moto/core/authorization.py), becomes 0, so every request after this one is checked. It is
process-wide: only ever do this to a moto of one's own, never the harness's shared one.

Prints {NAME: {"AccessKeyId": ..., "SecretAccessKey": ...}} on stdout.

Usage: tests/cluster/moto-python tests/cluster/moto-iam-users.py < spec.json
"""

import json
import sys
import urllib.request

import boto3


def main():
    spec = json.load(sys.stdin)
    endpoint = spec["endpoint"]
    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        region_name=spec["region"],
        # Any key: moto answers everyone while enforcement is off.
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
    )
    keys = {}
    for name, policy in spec["users"].items():
        iam.create_user(UserName=name)
        iam.put_user_policy(
            UserName=name, PolicyName=f"{name}-policy", PolicyDocument=json.dumps(policy)
        )
        key = iam.create_access_key(UserName=name)["AccessKey"]
        keys[name] = {
            "AccessKeyId": key["AccessKeyId"],
            "SecretAccessKey": key["SecretAccessKey"],
        }
    # Not a form type: Flask would parse the body away from the request.data moto reads.
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth",
        data=b"0",
        method="POST",
        headers={"Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        status = json.load(answer)
    if status.get("status") != "ok":
        sys.exit(f"moto did not turn IAM enforcement on: {status}")
    json.dump(keys, sys.stdout)


if __name__ == "__main__":
    main()
