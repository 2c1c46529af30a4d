package io.lakelog.spark;

/** The table asks for something this reader does not understand (a reader feature, a deletion vector):
 *  it refuses rather than guesses. */
public final class UnsupportedTableException extends RuntimeException {
    public UnsupportedTableException(String message) {
        super(message);
    }
}
