extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body that throws `StorageError` (the standard one rethrows
    /// untyped errors).
    func withStorageBytes<Result>(_ body: (UnsafeRawBufferPointer) throws(StorageError) -> Result) throws(StorageError) -> Result {
        let outcome: Swift.Result<Result, StorageError> = withUnsafeBytes { raw in
            Swift.Result { () throws(StorageError) -> Result in try body(raw) }
        }
        return try outcome.get()
    }
}
