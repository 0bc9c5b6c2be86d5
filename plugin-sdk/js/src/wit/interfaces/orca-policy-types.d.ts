// Generated from plugin-sdk/wit/since_v0.3.0 by `plugin-sdk/js/build types` (jco guest-types). Do not edit.
declare module 'orca:policy/types@0.3.0' {
  /**
   * Resources summed over a pod's containers, as the scheduler counts them (each init
   * container runs alone, so the larger of their maximum and the containers' sum counts).
   */
  export interface Resources {
    /**
     * CPU in millicores (`500m` is 500, `2` is 2000).
     */
    cpuMillis: bigint,
    memoryBytes: bigint,
    ephemeralStorageBytes: bigint,
    /**
     * `nvidia.com/gpu` only (other accelerators, such as `amd.com/gpu` or
     * `aws.amazon.com/neuron`, are in the pod's `json`). The apiserver copies a
     * container's limits into the requests it leaves out, so a container that sets only
     * `limits: {nvidia.com/gpu: 8}` requests 8.
     */
    gpus: number,
  }
  export interface Toleration {
    key?: string,
    operator?: string,
    value?: string,
    effect?: string,
  }
  /**
   * Kubernetes labels, annotations and node selectors: (key, value) pairs in key order.
   */
  export type StringMap = Array<[string, string]>;
  /**
   * The pod as policy sees it.
   */
  export interface Pod {
    namespace: string,
    name: string,
    uid: string,
    labels: StringMap,
    annotations: StringMap,
    requests: Resources,
    limits: Resources,
    nodeSelector: StringMap,
    tolerations: Array<Toleration>,
    priority?: number,
    /**
     * The whole pod object as JSON, for anything the fields above leave out.
     */
    json: string,
    /**
     * The availability zones the pod names by value (its `topology.kubernetes.io/zone`
     * node selector and its required node affinity's `In` lists), in order; empty when it
     * names none. The host enforces every zone rule (`NotIn` too) when it launches; this is
     * for selectors that want only types offered there (`instance-query.zones`). New in
     * 0.3.0.
     */
    zones: Array<string>,
  }
  /**
   * # Variants
   * 
   * ## `"amd64"`
   * 
   * ## `"arm64"`
   */
  export type Architecture = 'amd64' | 'arm64';
  /**
   * One EC2 instance type from the host's catalogue.
   */
  export interface InstanceType {
    /**
     * `p5.48xlarge`.
     */
    name: string,
    /**
     * `p5`.
     */
    family: string,
    vcpus: number,
    memoryMib: bigint,
    gpus: number,
    gpuModel?: string,
    architecture: Architecture,
    /**
     * USD per hour in the node's region; none when the catalogue does not know it.
     */
    onDemandPrice?: number,
    spotPrice?: number,
    /**
     * The availability zones of the node's region that offer the type
     * (`DescribeInstanceTypeOfferings`), in order; empty when the catalogue does not know.
     * New in 0.3.0.
     */
    zones: Array<string>,
  }
  /**
   * An instance type the pod may run on, and why; selectors return them best first.
   */
  export interface Candidate {
    instanceType: string,
    reason: string,
  }
  /**
   * # Variants
   * 
   * ## `"spot"`
   * 
   * ## `"on-demand"`
   */
  export type Market = 'spot' | 'on-demand';
  /**
   * How EC2 Fleet picks the pool (instance type and zone) among the candidates offered, in
   * EC2's words. New in 0.3.0.
   * # Variants
   * 
   * ## `"price-capacity-optimized"`
   * 
   * Spot: the pools least likely to be interrupted, then the cheapest of those.
   * ## `"capacity-optimized"`
   * 
   * Spot: the pools least likely to be interrupted, whatever they cost.
   * ## `"lowest-price"`
   * 
   * Spot or on-demand: the cheapest pool.
   * ## `"prioritized"`
   * 
   * On-demand: the candidates in the selector's order.
   */
  export type AllocationStrategy = 'price-capacity-optimized' | 'capacity-optimized' | 'lowest-price' | 'prioritized';
  export interface MarketDecision {
    market: Market,
    /**
     * USD per hour, spot only; none: the on-demand price caps it.
     */
    maxPrice?: number,
    /**
     * Whether a spot capacity error may fall back to on-demand.
     */
    fallbackToOnDemand: boolean,
    reason: string,
    /**
     * How EC2 Fleet picks among the candidates for `market`; none: the node's configured
     * strategy for that market (`provider.aws.fleet`). Spot takes the first three,
     * on-demand `lowest-price` or `prioritized`; the host refuses any other pairing. An
     * on-demand fallback uses the configured on-demand strategy. New in 0.3.0.
     */
    allocationStrategy?: AllocationStrategy,
    /**
     * Whether EC2's rebalance recommendation (a spot instance at raised risk of
     * interruption) marks the pod `DisruptionTarget` at once, so its controller replaces it
     * before the two-minute warning; false: the pod only gets a condition and an Event.
     * Spot only. New in 0.3.0.
     */
    markOnRebalance: boolean,
  }
  export interface Tag {
    key: string,
    value: string,
  }
  /**
   * What the host knows when tags are built.
   */
  export interface TagContext {
    nodeName: string,
    clusterName: string,
    instanceType: string,
    market: Market,
  }
  /**
   * A pod annotation the plugin cannot use.
   */
  export interface AnnotationError {
    annotation: string,
    value: string,
    /**
     * What would be accepted.
     */
    expected: string,
  }
  /**
   * Why a plugin could not decide. The host puts it in the pod's status and an Event.
   * What each case means for the pod is the chain's `onError` in config.yaml, per case.
   */
  export type PolicyError = PolicyErrorInvalidAnnotation | PolicyErrorNoMatch | PolicyErrorInvalidSettings | PolicyErrorUnsupported | PolicyErrorFailed | PolicyErrorDeclined;
  export interface PolicyErrorInvalidAnnotation {
    tag: 'invalid-annotation',
    val: AnnotationError,
  }
  /**
   * Nothing satisfies the pod (message says what was asked for).
   */
  export interface PolicyErrorNoMatch {
    tag: 'no-match',
    val: string,
  }
  /**
   * The plugin's settings from config.yaml are wrong.
   */
  export interface PolicyErrorInvalidSettings {
    tag: 'invalid-settings',
    val: string,
  }
  /**
   * The plugin does not implement this hook.
   */
  export interface PolicyErrorUnsupported {
    tag: 'unsupported',
  }
  export interface PolicyErrorFailed {
    tag: 'failed',
    val: string,
  }
  /**
   * Not this plugin's pod (the message says why, for the decision record): the next
   * plugin in the chain is asked. Unlike the errors above it is not a failure; only a
   * chain whose every plugin declines fails the pod. New in 0.2.0.
   */
  export interface PolicyErrorDeclined {
    tag: 'declined',
    val: string,
  }
  /**
   * # Variants
   * 
   * ## `"select-instance"`
   * 
   * ## `"choose-market"`
   * 
   * ## `"build-tags"`
   */
  export type Hook = 'select-instance' | 'choose-market' | 'build-tags';
  export interface PluginInfo {
    name: string,
    version: string,
    /**
     * The hooks this plugin implements; the host calls only these.
     */
    hooks: Array<Hook>,
  }
}
