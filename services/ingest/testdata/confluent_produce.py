"""Produces values Confluent's serializers framed to Sluice topics that validate them.

Run by TestIntegrationConfluentSerializerValuesValidated (schemas_integration_test.go) with
the address of a Sluice whose topic "payments" has schema.subject=payments-value (Avro) and
"pb-payments" schema.subject=pb-payments-value (Protobuf). Each serializer registers its
schema through Sluice's registry (under /registry) — the Protobuf one as a serialized file
descriptor, with its import as a reference — and the values go through ProducerService's
Connect JSON API as a browser or curl would send them. A value framed for another subject's
schema is refused; an incompatible Protobuf version is refused with Confluent's error code.
Prints one JSON line: the values sent.
"""
import base64
import json
import sys
import urllib.error
import urllib.request

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
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

    pb_values = protobuf(base, client)
    json_values = json_schema(base, client)
    print(json.dumps({"values": [v.hex() for v in values], "pb_values": [v.hex() for v in pb_values],
                      "json_values": [v.hex() for v in json_values]}))


def json_schema(base, client):
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Refund", "type": "object",
                         "properties": {"id": {"type": "string"}, "cents": {"type": "integer", "minimum": 0}},
                         "required": ["id", "cents"], "additionalProperties": False})
    ser = JSONSerializer(schema, client, conf={"auto.register.schemas": True})
    ctx = SerializationContext("json-refunds", MessageField.VALUE)
    values = [ser({"id": "r-%d" % i, "cents": 10 * i}, ctx) for i in range(3)]
    status, body = produce(base, "json-refunds", values)
    expect(status == 200 and len(body.get("results", [])) == 3, "json values: %s %r" % (status, body))

    # Framed right, but not a Refund: the serializer would not write it.
    bad = values[0][:5] + json.dumps({"id": "r-9", "cents": -5}).encode()
    status, body = produce(base, "json-refunds", [bad])
    expect(status == 400 and "records[0].value" in body.get("message", ""), "a negative refund: %s %r" % (status, body))

    # Requiring a new property breaks reading the documents written so far.
    stricter = json.loads(schema)
    stricter["properties"]["reason"] = {"type": "string"}
    stricter["required"].append("reason")
    try:
        client.register_schema("json-refunds-value", Schema(json.dumps(stricter), "JSON"))
        raise AssertionError("an incompatible JSON Schema version was registered")
    except SchemaRegistryError as e:
        expect(e.http_status_code == 409 and e.error_code == 409, "incompatible: %s %s %s" % (e.http_status_code, e.error_code, e))
    return values


def protobuf_classes():
    """Message classes built at run time, as protoc would generate them: shop.Payment in
    payments.proto, which imports money.proto (shop.Money) and a well-known type."""
    F = descriptor_pb2.FieldDescriptorProto
    money = descriptor_pb2.FileDescriptorProto(name="money.proto", package="shop", syntax="proto3")
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    pay = descriptor_pb2.FileDescriptorProto(name="payments.proto", package="shop", syntax="proto3",
                                             dependency=["money.proto", "google/protobuf/timestamp.proto"])
    p = pay.message_type.add(name="Payment")
    p.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    p.field.add(name="total", number=2, type=F.TYPE_MESSAGE, type_name=".shop.Money", label=F.LABEL_OPTIONAL)
    p.field.add(name="at", number=3, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp", label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import timestamp_pb2
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    for f in (ts, money, pay):
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Payment"))


def protobuf(base, client):
    Payment = protobuf_classes()
    ser = ProtobufSerializer(Payment, client, {"auto.register.schemas": True})
    ctx = SerializationContext("pb-payments", MessageField.VALUE)
    msgs = []
    for i in range(3):
        msg = Payment(id="p-%d" % i)
        msg.total.cents = 100 * i
        msg.at.seconds = 1764979200 + i
        msgs.append(msg)
    values = [ser(m, ctx) for m in msgs]
    status, body = produce(base, "pb-payments", values)
    expect(status == 200 and len(body.get("results", [])) == 3, "protobuf values: %s %r" % (status, body))
    refs = client.get_latest_version("pb-payments-value").schema.references
    expect([(r.name, r.subject) for r in refs] == [("money.proto", "money.proto")], "references %r" % refs)

    deser = ProtobufDeserializer(Payment, {"use.deprecated.format": False})
    expect(deser(values[1], ctx) == msgs[1], "read back %r" % deser(values[1], ctx))

    # The Avro values are not Protobuf values of this subject.
    status, body = produce(base, "pb-payments", [b"\x00" + values[0][1:5] + b"\x02\x09"])
    expect(status == 400 and "records[0].value" in body.get("message", ""), "a truncated payment: %s %r" % (status, body))

    # A version whose field 1 is an int64 cannot read the strings written so far.
    bad = 'syntax = "proto3";\npackage shop;\nmessage Payment { int64 id = 1; }\n'
    try:
        client.register_schema("pb-payments-value", Schema(bad, "PROTOBUF"))
        raise AssertionError("an incompatible Protobuf version was registered")
    except SchemaRegistryError as e:
        expect(e.http_status_code == 409 and e.error_code == 409, "incompatible: %s %s %s" % (e.http_status_code, e.error_code, e))
    return values


if __name__ == "__main__":
    main(sys.argv[1])
