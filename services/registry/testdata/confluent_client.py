"""Drives Sluice's schema registry with Confluent's own Python client.

Run by TestIntegrationConfluentPythonClient (rest_integration_test.go) with
the registry's URL as its argument. Each step uses confluent-kafka's
SchemaRegistryClient and Avro serializers as an application would; any
failed expectation raises. It prints one JSON line: the bytes the
serializer produced (for the Go test to check against the registry) and
what the client read back.
"""
import json
import sys

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

ORDER_V1 = json.dumps({"type": "record", "name": "Order", "namespace": "acme",
                       "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}]})
ORDER_V2 = json.dumps({"type": "record", "name": "Order", "namespace": "acme",
                       "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"},
                                  {"name": "note", "type": "string", "default": ""}]})
# cents changes type: data written with v1 cannot be read with it.
ORDER_BAD = json.dumps({"type": "record", "name": "Order", "namespace": "acme",
                        "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "string"}]})


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def main(url):
    client = SchemaRegistryClient({"url": url})
    ctx = SerializationContext("orders", MessageField.VALUE)

    # The serializer registers the schema under <topic>-value and frames
    # the record: magic byte 0, the 4-byte schema id, the Avro datum.
    ser = AvroSerializer(client, ORDER_V1, conf={"auto.register.schemas": True})
    record = {"id": "o-1", "cents": 1250}
    framed = ser(record, ctx)
    expect(framed[0] == 0, "magic byte %r" % framed[0])
    schema_id = int.from_bytes(framed[1:5], "big")

    # A deserializer that knows nothing fetches the schema by id.
    deser = AvroDeserializer(SchemaRegistryClient({"url": url}))
    expect(deser(framed, ctx) == record, "read back %r" % deser(framed, ctx))

    latest = client.get_latest_version("orders-value")
    expect(latest.version == 1 and latest.schema_id == schema_id, "latest %r" % latest)
    expect(client.get_subjects() == ["orders-value"], "subjects %r" % client.get_subjects())

    # An incompatible version is refused with Confluent's error code.
    try:
        client.register_schema("orders-value", Schema(ORDER_BAD, "AVRO"))
        raise AssertionError("an incompatible schema was registered")
    except SchemaRegistryError as e:
        expect(e.http_status_code == 409 and e.error_code == 409, "incompatible: %s %s" % (e.http_status_code, e.error_code))
    expect(not client.test_compatibility("orders-value", Schema(ORDER_BAD, "AVRO")), "test_compatibility(bad)")
    expect(client.test_compatibility("orders-value", Schema(ORDER_V2, "AVRO")), "test_compatibility(v2)")

    v2_id = client.register_schema("orders-value", Schema(ORDER_V2, "AVRO"))
    expect(client.get_versions("orders-value") == [1, 2], "versions %r" % client.get_versions("orders-value"))
    found = client.lookup_schema("orders-value", Schema(ORDER_V2, "AVRO"))
    expect(found.version == 2 and found.schema_id == v2_id, "lookup %r" % found)

    client.set_compatibility("orders-value", "NONE")
    expect(client.get_compatibility("orders-value") == "NONE", "level %r" % client.get_compatibility("orders-value"))
    bad_id = client.register_schema("orders-value", Schema(ORDER_BAD, "AVRO"))

    try:
        client.get_schema(bad_id + 100)
        raise AssertionError("an unknown schema id was found")
    except SchemaRegistryError as e:
        expect(e.http_status_code == 404 and e.error_code == 40403, "unknown id: %s %s" % (e.http_status_code, e.error_code))

    deleted = client.delete_subject("orders-value")
    expect(deleted == [1, 2, 3], "deleted %r" % deleted)
    expect(client.get_subjects() == [], "subjects after the delete %r" % client.get_subjects())
    expect(client.delete_subject("orders-value", permanent=True) == [1, 2, 3], "permanent delete")

    print(json.dumps({"framed": framed.hex(), "schema_id": schema_id, "v2_id": v2_id}))


if __name__ == "__main__":
    main(sys.argv[1])
