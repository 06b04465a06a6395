"""Produces values Confluent's Avro serializer framed to a Sluice topic that validates them.

Run by TestIntegrationConfluentSerializerValuesValidated (schemas_integration_test.go) with
the address of a Sluice whose topic "payments" has schema.subject=payments-value. The
serializer registers its schema through Sluice's registry (under /registry); the values
go through ProducerService's Connect JSON API as a browser or curl would send them. A value
framed for another subject's schema is refused. Prints one JSON line: the values sent.
"""
import base64
import json
import sys
import urllib.error
import urllib.request

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "acme",
                    "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}]})


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def produce(base, topic, values):
    body = json.dumps({"topic": topic, "records": [{"value": base64.b64encode(v).decode()} for v in values]})
    req = urllib.request.Request(base + "/sluice.v1.ProducerService/Produce", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def main(base):
    client = SchemaRegistryClient({"url": base + "/registry"})
    ser = AvroSerializer(client, ORDER, conf={"auto.register.schemas": True})
    ctx = SerializationContext("payments", MessageField.VALUE)
    values = [ser({"id": "o-%d" % i, "cents": 100 * i}, ctx) for i in range(3)]
    status, body = produce(base, "payments", values)
    expect(status == 200 and len(body.get("results", [])) == 3, "valid values: %s %r" % (status, body))

    # Framed for another subject: a real schema id, not one of payments-value's.
    other = AvroSerializer(client, json.dumps("string"), conf={"auto.register.schemas": True})
    stray = other("not an order", SerializationContext("notes", MessageField.VALUE))
    status, body = produce(base, "payments", [values[0], stray])
    expect(status == 400 and body.get("code") == "invalid_argument", "stray value: %s %r" % (status, body))
    expect("records[1].value" in body.get("message", "") and "not one of the subject's live versions" in body["message"],
           "stray value's message %r" % body.get("message"))

    print(json.dumps({"values": [v.hex() for v in values]}))


if __name__ == "__main__":
    main(sys.argv[1])
