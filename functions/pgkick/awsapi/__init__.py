"""The AWS calls a worker makes inside Lambda, signed and sent without boto3.

Why a package of its own, low in the layers: the database secret is read by
pgkick.config, the rescue booked and the kicks sent by pgkick.kick, and importing boto3
for any of them cost a worker 0.4 s of CPU here (pgkick.awsapi.signed_http says where
these are used, and where boto3 still is).
"""
