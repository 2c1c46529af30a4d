// kafkajs against lakelog: two members of one group with kafkajs's default assignor (RoundRobinAssigner) read a
// topic, then the admin client's setOffsets, resetOffsets, fetchOffsets and deleteGroups.
// Usage: node groups.js '{"brokers": "127.0.0.1:9092", "topic": "t", "group": "g", "partitions": 4, "records": 200}'
// Prints one JSON line per step; exits non-zero on any failure.
const { Kafka, logLevel } = require('kafkajs')

const cfg = JSON.parse(process.argv[2])
const kafka = new Kafka({ clientId: 'lakelog-kafkajs', brokers: [cfg.brokers], logLevel: process.env.KAFKAJS_LOG ? logLevel.DEBUG : logLevel.NOTHING,
  retry: { retries: 10 } })
const say = (step, value) => console.log(JSON.stringify({ step, ...value }))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  const seen = []
  const consumers = [0, 1].map((i) => kafka.consumer({ groupId: cfg.group, sessionTimeout: 10000,
    heartbeatInterval: 500, rebalanceTimeout: 20000 }))
  for (const [i, c] of consumers.entries()) {
    await c.connect()
    await c.subscribe({ topic: cfg.topic, fromBeginning: true })
    await c.run({ eachMessage: async ({ partition, message }) => { seen.push([i, partition, Number(message.offset)]) } })
  }
  // both members in the group, each with partitions, before any record is produced
  for (let n = 0; ; n++) {
    const [g] = (await admin.describeGroups([cfg.group])).groups
    const owners = g.members.filter((m) => m.memberAssignment && m.memberAssignment.length > 8)
    if (g.state === 'Stable' && g.members.length === 2 && owners.length === 2) {
      say('joined', { protocol: g.protocol, members: g.members.length })
      break
    }
    if (n > 240) throw new Error(`group not stable with 2 members: ${JSON.stringify(g)}`)
    await sleep(250)
  }
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < cfg.records; i++) messages.push({ value: `v${i}`, partition: i % cfg.partitions })
  await producer.send({ topic: cfg.topic, messages })
  await producer.disconnect()
  for (let n = 0; seen.length < cfg.records && n < 240; n++) await sleep(250)
  await sleep(1000) // a record read twice would arrive now
  say('consumed', { seen })
  for (const c of consumers) await c.disconnect()

  const fetched = async () => (await admin.fetchOffsets({ groupId: cfg.group, topics: [cfg.topic] }))[0]
    .partitions.map((p) => [p.partition, Number(p.offset)]).sort((a, b) => a[0] - b[0])
  say('committed', { offsets: await fetched() })
  await admin.setOffsets({ groupId: cfg.group, topic: cfg.topic,
    partitions: [...Array(cfg.partitions).keys()].map((p) => ({ partition: p, offset: String(p + 1) })) })
  say('setOffsets', { offsets: await fetched() })
  await admin.resetOffsets({ groupId: cfg.group, topic: cfg.topic, earliest: true })
  say('resetOffsets', { offsets: await fetched() })
  const before = (await admin.listGroups()).groups.map((g) => g.groupId)
  await admin.deleteGroups([cfg.group])
  const after = (await admin.listGroups()).groups.map((g) => g.groupId)
  say('deleteGroups', { listed_before: before.includes(cfg.group), listed_after: after.includes(cfg.group),
    offsets: await fetched() })
  await admin.disconnect()
}

main().then(() => process.exit(0), (e) => { say('error', { message: String(e && e.stack || e) }); process.exit(1) })
