// kafkajs's client surface against one cluster: node scenario.js BOOTSTRAP NAME
// Prints one JSON object: each step's result (what kafkajs returned, trimmed to what is comparable between
// clusters) or {"error": the KafkaJS error's type or name}.
'use strict'
const { Kafka, CompressionTypes, CompressionCodecs, ConfigResourceTypes, AclResourceTypes, AclOperationTypes,
        AclPermissionTypes, ResourcePatternTypes, logLevel } = require('kafkajs')
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
CompressionCodecs[CompressionTypes.LZ4] = new (require('kafkajs-lz4'))().codec

const [bootstrap, name] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'lakelog-compat', brokers: [bootstrap], logLevel: logLevel.NOTHING,
                          retry: { retries: 8 } })
const out = {}
const BASE_TS = 1700000000000
let current = null
let printed = false

function print (extra = {}) {
  if (!printed) {
    printed = true
    console.log(JSON.stringify({ ...out, ...extra }))
  }
}

// A promise kafkajs never settles (an answer it waits for in vain) leaves Node nothing to run: say where
process.on('beforeExit', () => print({ fatal: `stalled in ${current}` }))

async function step (key, fn) {
  current = key
  try {
    const got = await fn()
    out[key] = got === undefined ? 'ok' : got
  } catch (e) {
    out[key] = { error: e.type || e.name }
  }
}

async function consumeAll (groupId, topic, n, extra = {}) {
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200, ...extra })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const got = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${got.length} of ${n}`)), 60000)
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        got.push([partition, message.key && message.key.toString(), message.value && message.value.toString()])
        if (got.length >= n) { clearTimeout(timer); resolve() }
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  return got.sort()
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  const t = name
  await step('createTopics', () => admin.createTopics({ topics: [{ topic: t, numPartitions: 3 },
    { topic: `${t}-txn`, numPartitions: 1 }, { topic: `${t}-gone`, numPartitions: 1 }], waitForLeaders: true }))
  await step('createTopics_again', () => admin.createTopics({ topics: [{ topic: t, numPartitions: 3 }] }))
  await step('listTopics', async () => (await admin.listTopics()).filter(n => n.startsWith(t)).sort())
  await step('fetchTopicMetadata', async () => (await admin.fetchTopicMetadata({ topics: [t] })).topics.map(x =>
    [x.name, x.partitions.map(p => [p.partitionId, p.leader, p.replicas, p.isr, p.partitionErrorCode])
      .sort((a, b) => a[0] - b[0])]))
  const producer = kafka.producer()
  await producer.connect()
  for (const [codec, type] of [['none', CompressionTypes.None], ['gzip', CompressionTypes.GZIP],
    ['snappy', CompressionTypes.Snappy], ['lz4', CompressionTypes.LZ4]]) {
    await step(`send_${codec}`, async () => (await producer.send({ topic: t, compression: type, acks: -1,
      messages: [0, 1, 2].map(i => ({ partition: i, key: `${codec}-k${i}`, value: `${codec}-v${i}`,
        timestamp: String(BASE_TS + i * 1000), headers: { h: codec } })) }))
      .map(r => [r.partition, r.errorCode, r.baseOffset]).sort())
  }
  await producer.disconnect()
  const idem = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await idem.connect()
  await step('send_idempotent', async () => (await idem.sendBatch({ topicMessages: [{ topic: t,
    messages: [0, 1, 2].map(i => ({ partition: i, value: `idem-${i}` })) }] }))
    .map(r => [r.partition, r.errorCode, r.baseOffset]).sort())
  await idem.disconnect()
  await step('consume_group', () => consumeAll(`${t}-group`, t, 15))
  await step('fetchOffsets', async () => (await admin.fetchOffsets({ groupId: `${t}-group`, topics: [t] }))
    .map(x => x.partitions.map(p => [p.partition, p.offset]).sort()))
  await step('setOffsets', () => admin.setOffsets({ groupId: `${t}-group`, topic: t,
    partitions: [{ partition: 0, offset: '1' }] }))
  await step('resetOffsets', () => admin.resetOffsets({ groupId: `${t}-group`, topic: t, earliest: true }))
  await step('fetchOffsets_after', async () => (await admin.fetchOffsets({ groupId: `${t}-group`, topics: [t] }))
    .map(x => x.partitions.map(p => [p.partition, p.offset]).sort()))
  await step('describeGroups', async () => (await admin.describeGroups([`${t}-group`])).groups.map(g =>
    [g.groupId, g.state, g.protocolType, g.protocol, g.members.length, g.errorCode]))
  await step('listGroups', async () => (await admin.listGroups()).groups.filter(g => g.groupId.startsWith(t))
    .map(g => [g.groupId, g.protocolType]))
  await step('deleteGroups', async () => (await admin.deleteGroups([`${t}-group`])).map(g => [g.groupId, g.errorCode]))
  await step('deleteGroups_unknown', async () => (await admin.deleteGroups([`${t}-nogroup`])).map(g => [g.groupId, g.errorCode]))
  const configs = { type: ConfigResourceTypes.TOPIC, name: t, configNames: ['retention.ms', 'cleanup.policy'] }
  await step('describeConfigs', async () => (await admin.describeConfigs({ includeSynonyms: false,
    resources: [configs] })).resources.map(r => [r.errorCode, r.configEntries.map(c => [c.configName, c.configValue,
    c.isDefault, c.configSource, c.isSensitive, c.readOnly]).sort()]))
  await step('alterConfigs', async () => (await admin.alterConfigs({ validateOnly: false, resources: [{
    type: ConfigResourceTypes.TOPIC, name: t, configEntries: [{ name: 'retention.ms', value: '3600000' }] }] }))
    .resources.map(r => [r.errorCode, r.resourceName]))
  await step('describeConfigs_after', async () => {
    for (let i = 0; ; i++) { // Kafka's broker applies an alteration after answering it
      const got = (await admin.describeConfigs({ includeSynonyms: false, resources: [configs] })).resources.map(r =>
        [r.errorCode, r.configEntries.map(c => [c.configName, c.configValue, c.isDefault, c.configSource]).sort()])
      if (JSON.stringify(got).includes('3600000') || i > 100) return got
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  })
  await step('createPartitions', () => admin.createPartitions({ topicPartitions: [{ topic: t, count: 4 }] }))
  await step('createPartitions_fewer', () => admin.createPartitions({ topicPartitions: [{ topic: t, count: 2 }] }))
  await step('deleteTopicRecords', () => admin.deleteTopicRecords({ topic: t, partitions: [{ partition: 0, offset: '2' }] }))
  await step('fetchTopicOffsets', async () => (await admin.fetchTopicOffsets(t)).map(p => [p.partition, p.low,
    p.high, p.offset]).sort())
  await step('fetchTopicOffsetsByTimestamp', async () => (await admin.fetchTopicOffsetsByTimestamp(t,
    BASE_TS + 1000)).map(p => [p.partition, p.offset]).sort())
  await step('describeCluster', async () => { const c = await admin.describeCluster()
    return [c.brokers.map(b => b.nodeId), c.controller] })
  await step('deleteTopics', () => admin.deleteTopics({ topics: [`${t}-gone`] }))
  const acl = { resourceType: AclResourceTypes.TOPIC, resourceName: t, resourcePatternType: ResourcePatternTypes.LITERAL,
    principal: `User:${t}`, host: '*', operation: AclOperationTypes.READ, permissionType: AclPermissionTypes.ALLOW }
  await step('createAcls', () => admin.createAcls({ acl: [acl] }))
  await step('describeAcls', async () => (await admin.describeAcls({ ...acl })).resources.length)
  await step('deleteAcls', async () => (await admin.deleteAcls({ filters: [acl] })).filterResponses.map(f =>
    [f.errorCode, f.matchingAcls.length]))
  // transactions: one committed, one aborted; a read_committed group reads the committed one only
  const txp = kafka.producer({ transactionalId: `${t}-tx`, idempotent: true, maxInFlightRequests: 1 })
  await txp.connect()
  await step('transaction_commit', async () => {
    const tx = await txp.transaction()
    await tx.send({ topic: `${t}-txn`, messages: [{ value: 'committed-1' }, { value: 'committed-2' }] })
    await tx.commit()
  })
  await step('transaction_abort', async () => {
    const tx = await txp.transaction()
    await tx.send({ topic: `${t}-txn`, messages: [{ value: 'aborted' }] })
    await tx.abort()
  })
  await txp.disconnect()
  await step('consume_read_committed', async () => (await consumeAll(`${t}-rc`, `${t}-txn`, 2,
    { readUncommitted: false })).map(m => m[2]))
  await admin.disconnect()
}

main().then(() => { print(); process.exit(0) }, e => { print({ fatal: String(e) }); process.exit(0) })
