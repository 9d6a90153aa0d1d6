// The worker pool's entry (piscina loads it in each thread): the ES module worker.js, imported. piscina require()s a
// worker's file first, and Node 20's require() of an ES module once aborted a whole test process (FATAL ERROR
// v8::Module::IsGraphAsync, a worker started as its pool closed); a CommonJS entry keeps the module's loading on
// import(), started as the thread starts.
const loading = import('./worker.js')
loading.catch(() => {}) // a failure is thrown again to the first task, which piscina reports
module.exports = async (task) => (await loading).default(task)
